package mgmt

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// healthRoutes: health checks and the aliveness test, as RabbitMQ 4.x's
// rabbit_mgmt_wm_health_check_alarms, _local_alarms, _virtual_hosts,
// _port_listener and _protocol_listener, and 3.13's
// rabbit_mgmt_wm_aliveness_test: any management user may ask
// (is_authorized; the aliveness test needs the vhost visible, as
// is_authorized_vhost). A passing check is 200 {"status":"ok",...}, a
// failing one 503 {"status":"failed","reason":...,...}.
func (m *mgmt) healthRoutes() {
	m.handle("GET", "/api/health/checks/alarms", anyManagement, m.alarmsCheck("There are alarms in effect in the cluster"))
	m.handle("GET", "/api/health/checks/local-alarms", anyManagement, m.alarmsCheck("There are alarms in effect on the node"))
	m.handle("GET", "/api/health/checks/virtual-hosts", anyManagement, m.vhostsCheck)
	m.handle("GET", "/api/health/checks/port-listener/{port}", anyManagement, m.portListenerCheck)
	m.handle("GET", "/api/health/checks/protocol-listener/{protocol}", anyManagement, m.protocolListenerCheck)
	m.handle("GET", "/api/aliveness-test/{vhost}", anyManagement, m.alivenessTest)
}

// healthFailed answers a failed check: 503 with RabbitMQ's body.
func healthFailed(w http.ResponseWriter, reason string, extra map[string]any) {
	body := map[string]any{"status": "failed", "reason": reason}
	for k, v := range extra {
		body[k] = v
	}
	writeJSON(w, http.StatusServiceUnavailable, body)
}

// alarmList is the node's raised alarms as rabbit_alarm:format_as_maps
// writes them, [] when none.
func (m *mgmt) alarmList() []map[string]string {
	n := m.b.Node()
	out := []map[string]string{}
	if n.MemAlarm {
		out = append(out, map[string]string{"resource": "memory", "node": m.node()})
	}
	if n.DiskFreeAlarm {
		out = append(out, map[string]string{"resource": "disk", "node": m.node()})
	}
	return out
}

// alarmsCheck is GET /api/health/checks/alarms and /local-alarms. A
// cluster member knows only its own alarms, so both ask the same thing
// and differ in RabbitMQ's reason text.
func (m *mgmt) alarmsCheck(reason string) func(*mgmtCall) {
	return func(c *mgmtCall) {
		if alarms := m.alarmList(); len(alarms) > 0 {
			healthFailed(c.w, reason, map[string]any{"alarms": alarms})
			return
		}
		writeJSON(c.w, http.StatusOK, map[string]any{"status": "ok"})
	}
}

// vhostsCheck is GET /api/health/checks/virtual-hosts. RabbitMQ fails it
// for a vhost whose supervision tree is down; a Warren vhost is listed
// only while it is open, so every listed vhost is running and the check
// passes whenever it can answer.
func (m *mgmt) vhostsCheck(c *mgmtCall) {
	writeJSON(c.w, http.StatusOK, map[string]any{"status": "ok"})
}

// listenerPorts lists the ports of the node's AMQP listeners, sorted.
func (m *mgmt) listenerPorts() []int {
	ports := []int{}
	for _, a := range m.b.Overview().Listeners {
		ports = append(ports, a.Port)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// portListenerCheck is GET /api/health/checks/port-listener/{port}: 400
// "Invalid port" for a port that is not an integer.
func (m *mgmt) portListenerCheck(c *mgmtCall) {
	port, err := strconv.Atoi(c.p("port"))
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "Invalid port")
		return
	}
	ports := m.listenerPorts()
	if !slices.Contains(ports, port) {
		healthFailed(c.w, "No active listener", map[string]any{"missing": port, "ports": ports})
		return
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"status": "ok", "port": port})
}

// protocolListenerCheck is GET /api/health/checks/protocol-listener/
// {protocol}, with RabbitMQ's aliases of AMQP 0-9-1's name ("amqp091",
// "amqp0-9-1", ...). Warren's listeners all speak "amqp"; the management
// listener is the host program's, so "http" is not reported.
func (m *mgmt) protocolListenerCheck(c *mgmtCall) {
	proto := strings.ToLower(c.p("protocol"))
	switch proto {
	case "amqp091", "amqp0.9.1", "amqp0-9-1", "amqp0_9_1", "amqp10", "amqp1.0", "amqp1-0", "amqp1_0":
		proto = "amqp"
	case "amqps":
		proto = "amqp/ssl"
	}
	protocols := []string{}
	if len(m.listenerPorts()) > 0 {
		protocols = append(protocols, "amqp")
	}
	if !slices.Contains(protocols, proto) {
		healthFailed(c.w, "No active listener", map[string]any{"missing": proto, "protocols": protocols})
		return
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"status": "ok", "protocol": proto})
}

// alivenessQueue is the queue the aliveness test uses, left in place
// between tests as RabbitMQ leaves it.
const alivenessQueue = "aliveness-test"

// alivenessTest is GET /api/aliveness-test/{vhost}: on a direct channel as
// the requesting user (so with that user's permissions), declare the
// queue aliveness-test, publish "test_message" to it through the default
// exchange, and get it back. The publish is confirmed before the get, so
// the get cannot overtake it.
func (m *mgmt) alivenessTest(c *mgmtCall) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	ch, err := m.b.OpenChannel(c.r.Context(), c.user, vh)
	if err != nil {
		writeChannelError(c.w, err)
		return
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(alivenessQueue, false, false, false, false, nil); err != nil {
		writeAMQPError(c.w, fromAMQP091Error(err))
		return
	}
	if err := ch.Confirm(false); err != nil {
		writeAMQPError(c.w, fromAMQP091Error(err))
		return
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	if err := ch.PublishWithContext(c.r.Context(), "", alivenessQueue, false, false, amqp091.Publishing{Body: []byte("test_message")}); err != nil {
		writeAMQPError(c.w, fromAMQP091Error(err))
		return
	}
	select {
	case conf, ok := <-confirms:
		if !ok || !conf.Ack {
			healthFailed(c.w, "aliveness-test message was not confirmed", nil)
			return
		}
	case <-c.r.Context().Done():
		return // the client is gone
	}
	_, ok, err = ch.Get(alivenessQueue, true)
	switch {
	case err != nil:
		writeAMQPError(c.w, fromAMQP091Error(err))
	case !ok:
		healthFailed(c.w, "aliveness-test queue is empty", nil)
	default:
		writeJSON(c.w, http.StatusOK, map[string]any{"status": "ok"})
	}
}
