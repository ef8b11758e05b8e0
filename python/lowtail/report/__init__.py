"""The page toolkit every stage's page is drawn with: the page itself (page.py), figures and
their plots (figure.py, plots.py, png.py), tables, verdict cards and the interrupt timeline.
It reads only what the store holds; each stage's page (analyze/page.py, experiment/page.py,
compare/page.py, …) lives in its stage."""
