"""The equation IR: nodes a user builds, operators on them, and the analysis of a step."""
