"""FLOPs and bytes per operator from recorded shapes, counted once per call, and the run's MFU and roofline."""
