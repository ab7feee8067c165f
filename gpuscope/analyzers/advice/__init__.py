"""Each kind of advice decided once, from the report's facts: the vendor's words every text uses, whether a larger
batch fits, and which cheaper GPU (if any) a job can move to. The rules and the cost model ask here; none decides
these for itself."""
