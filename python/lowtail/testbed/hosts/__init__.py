"""A testbed whose roles run on other hosts (`[testbed] kind = "hosts"`), reached by SSH.

`ssh.py` is the connection (OpenSSH's client, one master connection per host), `facts.py`
what a host is and whether it can play its role, `remote.py` programs running there on
lowtail-leash, `session.py` the sweep's hold on its hosts and each run's testbed.
"""
