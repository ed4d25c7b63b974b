"""End-to-end checks of Warren's management API with rabbitmqadmin.

rabbitmqadmin is the command-line tool RabbitMQ's management plugin ships
(Debian's rabbitmq-server 3.10.8 installs it as /usr/bin/rabbitmqadmin).
Run by scripts/clients.sh against cmd/warren; usable by hand:

    /usr/bin/python3 scripts/clients/rabbitmqadmin_check.py /usr/bin/rabbitmqadmin 127.0.0.1:15672

It declares, lists and deletes a vhost, a user, a permission, a vhost
limit, a policy and an operator policy, and checks that a max-queues limit
and a policy's max-length set with it are enforced on queues declared
with it. rabbitmqadmin 3.10.8 has no topic permission
command, so topic permissions are not checked here (internal/mgmt's tests
cover them). Each check prints PASS or FAIL with a reason; the exit status
is 1 when any check failed.
"""

import json
import subprocess
import sys
import traceback

ADMIN = sys.argv[1] if len(sys.argv) > 1 else "/usr/bin/rabbitmqadmin"
HOST, _, PORT = (sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1:15672").rpartition(":")
VHOST, USER = "rmqadmin-v", "rmqadmin-u"

results = []


def admin(*args, vhost=None, ok=True):
    """Runs rabbitmqadmin as guest; returns (exit status, output)."""
    cmd = [sys.executable, "-B", ADMIN, "-H", HOST, "-P", PORT, "-u", "guest", "-p", "guest"]
    if vhost is not None:
        cmd += ["-V", vhost]
    p = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=30)
    out = p.stdout + p.stderr
    if ok and p.returncode != 0:
        raise AssertionError("rabbitmqadmin %s: exit %d: %s" % (" ".join(args), p.returncode, out.strip()))
    return p.returncode, out


def listing(kind):
    _, out = admin("-f", "raw_json", "list", kind)
    return json.loads(out)


def run(name, fn):
    try:
        detail = fn()
    except Exception as e:  # noqa: BLE001 - every failure is reported
        results.append(("FAIL", name))
        print("FAIL %s: %s" % (name, e))
        traceback.print_exc(limit=2)
        return
    results.append(("PASS", name))
    print("PASS %s%s" % (name, ": " + detail if detail else ""))


def declare_vhost():
    admin("declare", "vhost", "name=" + VHOST)
    names = [v["name"] for v in listing("vhosts")]
    assert VHOST in names, names


def declare_user():
    admin("declare", "user", "name=" + USER, "password=pw", "tags=management")
    users = {u["name"]: u for u in listing("users")}
    assert USER in users, list(users)
    assert users[USER]["tags"] in (["management"], "management"), users[USER]["tags"]


def declare_permission():
    admin("declare", "permission", "vhost=" + VHOST, "user=" + USER, "configure=^q", "write=.*", "read=.*")
    perms = [p for p in listing("permissions") if p["vhost"] == VHOST and p["user"] == USER]
    assert perms == [{"user": USER, "vhost": VHOST, "configure": "^q", "write": ".*", "read": ".*"}], perms


def vhost_limit():
    # guest declares the queues: like RabbitMQ, Warren gives nobody
    # permissions on a new vhost.
    admin("declare", "permission", "vhost=" + VHOST, "user=guest", "configure=.*", "write=.*", "read=.*")
    admin("declare", "vhost_limit", "vhost=" + VHOST, "name=max-queues", "value=1")
    limits = [l for l in listing("vhost_limits") if l["vhost"] == VHOST]
    assert limits == [{"vhost": VHOST, "value": {"max-queues": 1}}], limits
    admin("declare", "queue", "name=q1", vhost=VHOST)
    status, out = admin("declare", "queue", "name=q2", vhost=VHOST, ok=False)
    assert status != 0, "a second queue was declared over max-queues 1"
    assert "queue limit in vhost" in out, out
    admin("delete", "vhost_limit", "vhost=" + VHOST, "name=max-queues")
    limits = [l for l in listing("vhost_limits") if l["vhost"] == VHOST]
    assert limits == [], limits
    admin("declare", "queue", "name=q2", vhost=VHOST)
    return "max-queues enforced: " + out.strip().splitlines()[-1]


def policies():
    # A policy and an operator policy over rabbitmqadmin, as RabbitMQ
    # users declare them: each is listed, applies to a queue declared
    # without arguments (the queue's policy and operator_policy fields),
    # takes effect (max-length 1 keeps one message) and goes on delete.
    admin("declare", "policy", "name=p-len", "pattern=^pq$", 'definition={"max-length": 1}',
          "apply-to=queues", "priority=1")
    admin("declare", "operator_policy", "name=op-ttl", "pattern=^pq$", 'definition={"message-ttl": 600000}',
          "apply-to=queues")
    pols = [(p["name"], p["pattern"], p["definition"], p["apply-to"], p["priority"]) for p in listing("policies")]
    assert ("p-len", "^pq$", {"max-length": 1}, "queues", 1) in pols, pols
    ops = [p["name"] for p in listing("operator_policies")]
    assert "op-ttl" in ops, ops
    admin("declare", "queue", "name=pq")
    for body in ("one", "two"):
        admin("publish", "routing_key=pq", "payload=" + body)
    _, out = admin("-f", "raw_json", "get", "queue=pq", "count=5", "ackmode=ack_requeue_false")
    bodies = [m["payload"] for m in json.loads(out)]
    assert bodies == ["two"], bodies
    q = [q for q in listing("queues") if q["name"] == "pq"][0]
    assert q.get("policy") == "p-len" and q.get("operator_policy") == "op-ttl", q
    admin("delete", "policy", "name=p-len")
    admin("delete", "operator_policy", "name=op-ttl")
    admin("delete", "queue", "name=pq")
    assert "p-len" not in [p["name"] for p in listing("policies")]
    assert "op-ttl" not in [p["name"] for p in listing("operator_policies")]
    return "max-length 1 kept %s" % bodies


def delete_all():
    admin("delete", "permission", "vhost=" + VHOST, "user=" + USER)
    assert not [p for p in listing("permissions") if p["user"] == USER]
    admin("delete", "user", "name=" + USER)
    assert USER not in [u["name"] for u in listing("users")]
    admin("delete", "vhost", "name=" + VHOST)
    assert VHOST not in [v["name"] for v in listing("vhosts")]


for check_name, check_fn in [
    ("declare and list a vhost", declare_vhost),
    ("declare and list a user", declare_user),
    ("declare and list a permission", declare_permission),
    ("declare, list, enforce and delete a vhost limit", vhost_limit),
    ("declare, list, apply and delete a policy and an operator policy", policies),
    ("delete the permission, user and vhost", delete_all),
]:
    run(check_name, check_fn)

failed = [name for status, name in results if status == "FAIL"]
print("rabbitmqadmin: %d passed, %d failed" % (len(results) - len(failed), len(failed)))
sys.exit(1 if failed else 0)
