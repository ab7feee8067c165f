"""One module per stage (and one for what the trace says of itself): each ``apply(ctx) -> RuleOutput``."""
