"""The verdict and the advice: stage shares, the rules that read them, and the savings model.

``verdict.diagnose`` runs every rule in ``rules/`` over a Context (``context.py``); ``codes.py`` names every
finding and recommendation code."""
