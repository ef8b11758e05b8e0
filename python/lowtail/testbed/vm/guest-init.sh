#!/bin/sh
# lowtail's guest: PID 1 of the VM device under test (busybox sh).
#
# Everything about the run comes from the kernel command line (lowtail.NAME=VALUE), so one
# cached image serves every run. The host talks to this script over the virtio-serial port
# named lowtail.0:
#   guest → host   @ready | @irq + /proc/interrupts + @end | @stats {json} | @stopped | @error text
#   host → guest   stop (then, once it has @stopped: poweroff)
# The serial console (ttyS0) gets the kernel's log and this script's complaints.
# Programs that busybox also has as applets (ip, tc) are called by path: busybox's shell runs
# its own applets before anything on PATH.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp

arg() {
	for a in $(cat /proc/cmdline); do
		case "$a" in "lowtail.$1="*) echo "${a#*=}"; return ;; esac
	done
}
console() { echo "lowtail-guest: $*" > /dev/console; }

for m in $(cat /etc/lowtail/modules); do
	insmod "/lib/modules/$m.ko" || console "cannot load module $m"
done

if [ "$(arg mode)" = probe ]; then
	# Acceleration probe: booting this far is all that is asked.
	console "@booted"
	poweroff -f
fi

port=
for _ in $(seq 200); do
	for p in /sys/class/virtio-ports/*; do
		[ "$(cat "$p/name" 2> /dev/null)" = lowtail.0 ] && [ -e "/dev/${p##*/}" ] && port="/dev/${p##*/}"
	done
	[ -n "$port" ] && break
	usleep 50000
done
if [ -z "$port" ]; then
	console "no virtio-serial port lowtail.0 (is virtio_console loaded?)"
	poweroff -f
fi
exec 3<> "$port"

fail() {
	echo "@error $*" >&3
	console "$*"
	sleep 1
	poweroff -f
}

iface() {
	for d in /sys/class/net/*; do
		[ "$(cat "$d/address")" = "$1" ] && { echo "${d##*/}"; return; }
	done
}
IN=$(iface "$(arg in)")
OUT=$(iface "$(arg out)")
[ -n "$IN" ] && [ -n "$OUT" ] || fail "no network interfaces with the addresses $(arg in) and $(arg out)"
sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2> /dev/null
for i in "$IN" "$OUT"; do
	# Promiscuous: the test traffic is addressed to the generator's other port, not to us.
	ip link set "$i" promisc on up || fail "cannot bring $i up"
done

FWD=
IPS=
case "$(arg fwd)" in
mirred)
	/usr/sbin/tc qdisc add dev "$IN" ingress || fail "tc: cannot add the ingress qdisc"
	/usr/sbin/tc filter add dev "$IN" parent ffff: protocol all matchall action mirred egress redirect dev "$OUT" \
		|| fail "tc: cannot add the matchall + mirred redirect"
	;;
bridge)
	/usr/sbin/ip link add br0 type bridge stp_state 0 forward_delay 0 \
		&& /usr/sbin/ip link set "$IN" master br0 && /usr/sbin/ip link set "$OUT" master br0 \
		&& /usr/sbin/ip link set br0 up || fail "cannot build the bridge"
	;;
lowtail-fwd)
	spin=$(arg spin_us)
	/usr/bin/lowtail-fwd --in "$IN" --out "$OUT" --work-ns "$(arg work_ns)" --batch "$(arg batch)" \
		--cpu "$(arg fwd_cpu)" --rt-priority "$(arg rt_priority)" ${spin:+--spin-us "$spin"} \
		--stats-json /tmp/fwd.json --ready-file /tmp/fwd.ready > /tmp/fwd.log 2>&1 &
	FWD=$!
	for _ in $(seq 400); do
		[ -e /tmp/fwd.ready ] && break
		kill -0 "$FWD" 2> /dev/null || fail "lowtail-fwd: $(tail -n 1 /tmp/fwd.log)"
		usleep 25000
	done
	[ -e /tmp/fwd.ready ] || fail "lowtail-fwd did not start within 10 s"
	;;
suricata)
	# The IPS: configuration, rules and program are in the image (duts/suricata.py, guest_layer).
	mkdir -p /tmp/suricata
	sed -e "s/@IN@/$IN/g" -e "s/@OUT@/$OUT/g" /etc/lowtail/suricata/suricata.yaml > /tmp/suricata/suricata.yaml
	/usr/bin/suricata -c /tmp/suricata/suricata.yaml --af-packet -k none > /tmp/suricata/console.log 2>&1 &
	FWD=$!
	IPS=1
	for _ in $(seq 3600); do
		grep -q "Engine started" /tmp/suricata/console.log && break
		kill -0 "$FWD" 2> /dev/null || fail "suricata: $(grep -m 1 '^E:' /tmp/suricata/console.log || tail -n 1 /tmp/suricata/console.log)"
		usleep 50000
	done
	grep -q "Engine started" /tmp/suricata/console.log || fail "suricata did not start within 180 s"
	# Its workers real-time, as the host's IPS runs them; they sleep in poll() without frames.
	for t in /proc/"$FWD"/task/*; do
		case "$(cat "$t/comm")" in W#*) /usr/bin/chrt -f -p "$(arg rt_priority)" "${t##*/}" > /dev/null 2>&1 ;; esac
	done
	;;
*) fail "unknown forwarder $(arg fwd)" ;;
esac
echo "@ready" >&3

SAMPLER=
irq_ms=$(arg irq_ms)
if [ "${irq_ms:-0}" -gt 0 ]; then
	(
		while :; do
			{
				echo "@irq"
				cat /proc/interrupts
				echo "@end"
			} >&3
			usleep $((irq_ms * 1000))
		done
	) &
	SAMPLER=$!
	# On the housekeeping vCPU: reading the counters on the forwarder's vCPU would be the
	# periodic interruption the URLLC studies traced to their own monitor.
	taskset -p -c "$(arg hk_cpu)" "$SAMPLER" > /dev/null 2>&1
fi

while read -r cmd <&3; do
	[ "$cmd" = stop ] && break
done
[ -n "$SAMPLER" ] && kill "$SAMPLER" && wait "$SAMPLER" 2> /dev/null

counter() { cat "/sys/class/net/$1/statistics/$2"; }
if [ -n "$IPS" ]; then
	# Suricata writes its final statistics as it exits: the last eve stats record.
	kill -INT "$FWD"
	wait "$FWD"
	echo "@stats {\"program\": \"suricata\", \"eve\": $(tail -n 1 /tmp/suricata/suricata-stats.json)}" >&3
elif [ -n "$FWD" ]; then
	kill -INT "$FWD"
	wait "$FWD"
	echo "@stats $(tr -d '\n' < /tmp/fwd.json)" >&3
else
	echo "@stats {\"forwarder\": \"$(arg fwd)\", \"in_rx_packets\": $(counter "$IN" rx_packets), \"in_rx_dropped\": $(counter "$IN" rx_dropped), \"out_tx_packets\": $(counter "$OUT" tx_packets), \"out_tx_dropped\": $(counter "$OUT" tx_dropped)}" >&3
fi
echo "@stopped" >&3
# Power off only once the host has read everything: what is still in the port's queue
# when the machine stops is lost.
read -r -t 10 cmd <&3
poweroff -f
