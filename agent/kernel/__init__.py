"""What a kernel line says: the event it announces (NVIDIA faults, freeze precursors), with its
meaning, severity and recommended action, whatever prefix the line carries.

Standard library only and shared: the collector classifies every stored kernel line with it, and
the agent's guard matches its rules with the very same verdicts.
"""
