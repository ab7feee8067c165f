"""Independent checks: each figure recomputed from the raw trace by a small, slow, obviously right function that
shares nothing with gpuscope's readers or analyzers, over every bundled trace (docs/accuracy.md)."""
