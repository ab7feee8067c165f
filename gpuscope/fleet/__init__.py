"""Fleet mode: a cluster's GPUs, jobs and waste, from the Prometheus that already scrapes dcgm-exporter."""

from gpuscope.fleet.analysis import analyze_fleet, check_group_by
from gpuscope.fleet.prometheus import Prometheus, PrometheusError
from gpuscope.fleet.query import choose_step_s, fetch_fleet, plan_window
from gpuscope.model.fleet import FleetData, FleetReport, FleetWindow, GroupReport, IdleGpu, Thresholds

__all__ = [
    "FleetData", "FleetReport", "FleetWindow", "GroupReport", "IdleGpu", "Prometheus", "PrometheusError",
    "Thresholds", "analyze_fleet", "check_group_by", "choose_step_s", "fetch_fleet", "plan_window",
]
