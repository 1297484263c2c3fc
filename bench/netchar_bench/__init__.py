"""Parsers and report generators of the benchmark scripts in bench/ (stdlib only).

Modules: peers (every tool's output -> figures), tcp_report, udp_report, rr_report and
adapter_report (the tables the scripts print), soak and load50 (checks of netchar's JSON results
for bench/soak.sh and bench/load50.sh).  The scripts run them as `python3 -m netchar_bench.MODULE`
with bench/ on PYTHONPATH (lib.sh: bench_py); bench/tests/ tests them against the saved raw
outputs in bench/results/raw/.
"""
