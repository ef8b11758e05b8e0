"""Kernel traces of a run's cores: what ran on the DuT's, the generator's and the
timestamper's cores while the traffic flowed, on a clock mapped onto the packets'
timestamps.

    tracefs.py     an ftrace instance per run and host (`lowtail-<tag>`): set up, started,
                   stopped, its per-CPU ring buffers read after the run, removed (and
                   registered for `lowtail testbed clean` before it exists), on this host or
                   through a `Shell` on another
    ringbuffer.py  the kernel's binary ring-buffer pages (trace_pipe_raw) and event formats
                   parsed into events
    timeline.py    events into intervals (a task on a core, an interrupt vector, an IRQ
                   handler, a softirq, a VM exit), on the capture clock, as a Parquet file
                   (several hosts' merged, each row with its host)
    run.py         one run's recordings: one per host that carries a role, and what was
                   not traced, where and why
"""
