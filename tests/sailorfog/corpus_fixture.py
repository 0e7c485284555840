"""A small fictional corpus with dates, numbers and cyclic links, for the synthesis tests."""

PAGES = [
    ("Velmora Observatory", "Velmora Observatory is an astronomical observatory founded in 1887 by Idris Kallan on "
     "Mount Ostrel. It houses a 40 inch refractor telescope built by Harlow Optics."),
    ("Idris Kallan", "Idris Kallan was an astronomer born in 1851 in Tarnis. He founded Velmora Observatory and "
     "compiled the Kallan Catalogue of 312 nebulae."),
    ("Mount Ostrel", "Mount Ostrel is a mountain in the Serran Range with an elevation of 2,450 metres. Velmora "
     "Observatory stands on its summit, and shepherds from Tarnis graze flocks on its slopes."),
    ("Harlow Optics", "Harlow Optics is a lens maker founded in 1862 in Tarnis by Edwin Harlow. It ground the "
     "refractor of Velmora Observatory and employed 230 craftsmen."),
    ("Tarnis", "Tarnis is a port city on the Gellan coast with a population of 84,000. The astronomer Idris "
     "Kallan and the optician Edwin Harlow were born in Tarnis."),
    ("Edwin Harlow", "Edwin Harlow was an optician born in 1830 in Tarnis who founded Harlow Optics after an "
     "apprenticeship in Quendal."),
    ("Kallan Catalogue", "The Kallan Catalogue is a list of 312 nebulae published in 1899 by Idris Kallan at "
     "Velmora Observatory."),
    ("Serran Range", "The Serran Range is a chain of granite peaks whose highest summit is Mount Ostrel; it "
     "separates the Gellan coast from the Quendal plateau."),
    ("Quendal", "Quendal is a market town on a high plateau, known since 1412 for its glassworks and a "
     "guild of 57 lens grinders."),
    ("Brisk Observatory", "Brisk Observatory is an astronomical observatory founded in 1889 near Tarnis. Its "
     "telescope was bought from a foreign maker."),
    ("Gellan coast", "The Gellan coast is a rocky shoreline 120 kilometres long, home to the port of Tarnis."),
    ("Orvo Lighthouse", "Orvo Lighthouse is a tower on the Gellan coast first lit in 1871, with a lens made in "
     "Quendal."),
]
