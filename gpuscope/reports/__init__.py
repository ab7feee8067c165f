"""The views of a Report: the terminal (rich), the HTML and PDF reports, operator and step tables, Perfetto step
files, `gpuscope top`'s frame."""
