"""The cost model: per-block micro-step costs, the plan, the super-step tree and its evaluation."""
