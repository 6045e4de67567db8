"""The results tree and what is written into it: every path (`layout`), every table's
columns (`tables`), outputs written whole (`atomic`), the
version of every results JSON (`formats`), artifact copies (`files`), the tail
from every request (`tail`), what a run built (`built`), what a regression report compares
with (`baseline`) and what a measurement recorded, read back for the reports (`facts`)."""
