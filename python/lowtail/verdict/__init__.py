"""The URLLC verdict in one place: a budget judged on a run, a device's verdict over its configurations, their documents."""
