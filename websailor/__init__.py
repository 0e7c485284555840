"""websailor-gym: the command-line dispatcher, the end-to-end pipeline and the report."""

__version__ = "0.1.0"
