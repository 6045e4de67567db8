"""A configuration's scenarios measured level by level on a warmed server
(deploybench.serving): the closed loop (`closed_loop`: offline, online, the floor, a search
point's sweeps), the open loop (`open_loop`: the rate scenario and its bisection)."""
