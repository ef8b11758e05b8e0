"""The host under the device under test: audit and tuning (`lowtail host`), OS noise and
interrupt profiles (`lowtail noise`), interrupt sampling and energy during runs."""
