

def test_sentences_keep_initials_and_abbreviations_inside():
    from sailorfog.text import sentences

    assert sentences("J. R. R. Tolkien wrote “The Hobbit”. Dr. Smith read it c. 1950. Then he slept.") == [
        "J. R. R. Tolkien wrote “The Hobbit”.", "Dr. Smith read it c. 1950.", "Then he slept."]
