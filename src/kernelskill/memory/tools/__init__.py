"""What people run on the long-term memory: the `kernelskill memory` commands, the decision benchmark, learning
proposed cases from finished runs, and the readable rendering of a decision."""
