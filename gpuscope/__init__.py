"""gpuscope: how busy your GPUs really were, what held them back, what it cost, and what to change."""

__version__ = "0.1.0"
