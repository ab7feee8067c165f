"""Relations that must hold: real traces transformed in known ways, and how each answer must move
(docs/relations.md)."""
