"""End-to-end checks of Warren with pika, RabbitMQ's Python client.

Run by scripts/clients.sh against cmd/warren; usable by hand:

    /usr/bin/python3 scripts/clients/pika_check.py amqp://guest:guest@127.0.0.1:5672/

Written for Debian's python3-pika 1.2.0 (BlockingConnection only), which has
no update_secret: that check sends connection.update-secret itself. Each check
prints PASS or FAIL with a reason; the exit status is 1 when any check
failed. The expected behaviour is RabbitMQ 4.x's (the same as 3.13's for
everything checked here).
"""

import struct
import sys
import time
import traceback
import uuid

import pika
import pika.amqp_object
import pika.data
import pika.exceptions
import pika.spec

URL = sys.argv[1] if len(sys.argv) > 1 else "amqp://guest:guest@127.0.0.1:5672/"
WAIT = 5.0  # seconds any one expected message may take

results = []


def connect():
    params = pika.URLParameters(URL)
    params.socket_timeout = WAIT
    params.blocked_connection_timeout = WAIT
    params.connection_attempts = 1
    return pika.BlockingConnection(params)


def unique(prefix):
    return "clients-%s-%s" % (prefix, uuid.uuid4().hex[:8])


def get_one(conn, ch, queue):
    """Polls queue with basic.get until one message arrives or WAIT passes."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        method, props, body = ch.basic_get(queue, auto_ack=True)
        if method is not None:
            return method, props, body
        conn.process_data_events(time_limit=0.05)
    raise AssertionError("no message on %r within %.0fs" % (queue, WAIT))


def get_one_no_ack(conn, ch, queue):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        method, props, body = ch.basic_get(queue, auto_ack=False)
        if method is not None:
            return method, props, body
        conn.process_data_events(time_limit=0.05)
    raise AssertionError("no message on %r within %.0fs" % (queue, WAIT))


CHECKS = []


def check(name):
    """check registers fn to run under name; main runs them in order."""

    def wrap(fn):
        CHECKS.append((name, fn))
        return fn

    return wrap


def run(name, fn):
    """run runs one check and prints PASS, FAIL or SKIP with its reason."""
    try:
        note = fn()
    except Skip as s:
        results.append(("SKIP", name))
        print("SKIP %s: %s" % (name, s), flush=True)
        return
    except Exception as e:  # every failure, not just AssertionError
        results.append(("FAIL", name))
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
        traceback.print_exc(file=sys.stdout)
        return
    results.append(("PASS", name))
    print("PASS %s%s" % (name, ": " + note if note else ""), flush=True)


class Skip(Exception):
    pass


@check("direct reply-to RPC round trip")
def rpc_direct_reply_to():
    client = connect()
    server = connect()
    try:
        cch = client.channel()
        sch = server.channel()
        rpc_queue = sch.queue_declare(queue="", exclusive=True).method.queue

        replies = []
        cch.basic_consume(
            "amq.rabbitmq.reply-to",
            lambda ch, m, p, b: replies.append((p, b)),
            auto_ack=True,
        )
        corr = uuid.uuid4().hex
        cch.basic_publish(
            "",
            rpc_queue,
            b"ping",
            pika.BasicProperties(reply_to="amq.rabbitmq.reply-to", correlation_id=corr),
        )

        _, req_props, req_body = get_one(server, sch, rpc_queue)
        assert req_body == b"ping", req_body
        reply_to = req_props.reply_to
        assert reply_to and reply_to.startswith("amq.rabbitmq.reply-to."), (
            "reply_to not rewritten to amq.rabbitmq.reply-to.<suffix>: %r" % reply_to
        )
        sch.basic_publish(
            "",
            reply_to,
            b"pong",
            pika.BasicProperties(correlation_id=req_props.correlation_id),
        )

        deadline = time.monotonic() + WAIT
        while not replies and time.monotonic() < deadline:
            client.process_data_events(time_limit=0.05)
        assert replies, "no reply within %.0fs" % WAIT
        props, body = replies[0]
        assert body == b"pong", body
        assert props.correlation_id == corr, props.correlation_id
        return "reply_to rewritten to %s" % reply_to
    finally:
        client.close()
        server.close()


@check("CC and BCC headers route to extra queues, BCC removed on delivery")
def cc_bcc():
    conn = connect()
    try:
        ch = conn.channel()
        main, cc, bcc = unique("main"), unique("cc"), unique("bcc")
        for q in (main, cc, bcc):
            ch.queue_declare(queue=q, exclusive=True)
        ch.basic_publish(
            "",
            main,
            b"hello",
            pika.BasicProperties(headers={"CC": [cc], "BCC": [bcc], "keep": "yes"}),
        )
        for q in (main, cc, bcc):
            _, props, body = get_one(conn, ch, q)
            assert body == b"hello", (q, body)
            headers = props.headers or {}
            assert "BCC" not in headers, "BCC header delivered on %s: %r" % (q, headers)
            assert headers.get("keep") == "yes", "other headers lost on %s: %r" % (q, headers)
            assert headers.get("CC") == [cc], "CC header changed on %s: %r" % (q, headers)
        for q in (main, cc, bcc):
            n = ch.queue_declare(queue=q, passive=True).method.message_count
            assert n == 0, "%s holds %d more message(s): delivered more than once" % (q, n)
    finally:
        conn.close()


@check("queue declared without x-queue-type is equivalent to classic")
def queue_type_equivalence():
    conn = connect()
    try:
        ch = conn.channel()
        q1, q2 = unique("qt1"), unique("qt2")
        ch.queue_declare(queue=q1, exclusive=True)
        ch.queue_declare(queue=q1, exclusive=True, arguments={"x-queue-type": "classic"})
        ch.queue_declare(queue=q2, exclusive=True, arguments={"x-queue-type": "classic"})
        ch.queue_declare(queue=q2, exclusive=True)
        # Still an equivalence check, not one that accepts anything.
        try:
            ch.queue_declare(queue=q1, exclusive=True, arguments={"x-queue-type": "stream"})
        except pika.exceptions.ChannelClosedByBroker as e:
            assert e.reply_code == 406, "redeclare as stream: %d %s" % (e.reply_code, e.reply_text)
        else:
            raise AssertionError("redeclaring a classic queue as a stream succeeded")
    finally:
        conn.close()


class UpdateSecret(pika.amqp_object.Method):
    """UpdateSecret is connection.update-secret (10, 70) as RabbitMQ's
    extension of AMQP 0-9-1 defines it: new-secret (longstr), reason
    (shortstr). pika 1.2.0's spec lacks it."""

    INDEX = 0x000A0046
    NAME = "Connection.UpdateSecret"

    def __init__(self, new_secret=b"", reason=""):
        self.new_secret = new_secret
        self.reason = reason

    @property
    def synchronous(self):
        return True

    def encode(self):
        secret = self.new_secret
        if isinstance(secret, str):
            secret = secret.encode("utf-8")
        pieces = [struct.pack(">I", len(secret)), secret]
        pika.data.encode_short_string(pieces, self.reason)
        return pieces


class UpdateSecretOk(pika.amqp_object.Method):
    """UpdateSecretOk is connection.update-secret-ok (10, 71), no fields."""

    INDEX = 0x000A0047
    NAME = "Connection.UpdateSecretOk"

    @property
    def synchronous(self):
        return False

    def decode(self, encoded, offset=0):
        return self

    def encode(self):
        return []


@check("connection.update-secret answered with update-secret-ok")
def update_secret():
    conn = connect()
    try:
        if hasattr(conn, "update_secret"):  # a later pika
            conn.update_secret("guest", "clients check")
            how = "pika's update_secret"
        else:
            # pika 1.2.0: send the method by hand on channel 0 and wait for the
            # reply through pika's own callback table, which routes
            # channel-0 replies by method name.
            pika.spec.methods.setdefault(UpdateSecretOk.INDEX, UpdateSecretOk)
            replies = []
            conn._impl._rpc(
                0,
                UpdateSecret("guest", "clients check"),
                lambda frame: replies.append(frame.method),
                [UpdateSecretOk],
            )
            deadline = time.monotonic() + WAIT
            while not replies and time.monotonic() < deadline:
                conn.process_data_events(time_limit=0.05)
            assert replies, "no update-secret-ok within %.0fs" % WAIT
            assert isinstance(replies[0], UpdateSecretOk), replies[0]
            how = "sent by hand: pika %s has no update_secret" % pika.__version__
        # The connection still works afterwards.
        conn.channel().queue_declare(queue="", exclusive=True)
        return how
    finally:
        if conn.is_open:
            conn.close()


@check("ack multiple=True of an unknown delivery tag closes the channel with 406")
def ack_unknown_multiple():
    conn = connect()
    try:
        ch = conn.channel()
        q = ch.queue_declare(queue="", exclusive=True).method.queue
        ch.basic_publish("", q, b"one")
        method, _, _ = get_one_no_ack(conn, ch, q)
        ch.basic_ack(delivery_tag=method.delivery_tag + 100, multiple=True)
        try:
            # basic.ack has no reply: a synchronous call after it sees the close.
            ch.queue_declare(queue=q, passive=True)
        except pika.exceptions.ChannelClosedByBroker as e:
            assert e.reply_code == 406, "closed with %d %s, want 406" % (e.reply_code, e.reply_text)
            text = e.reply_text
        else:
            raise AssertionError("channel still open after ack of an unknown tag with multiple=True")
        # Only the channel closed: the connection serves a new one, and the
        # unacked message went back to the queue with the channel.
        ch2 = conn.channel()
        _, _, body = get_one(conn, ch2, q)
        assert body == b"one", body
        return "%d %s" % (406, text)
    finally:
        if conn.is_open:
            conn.close()


for check_name, check_fn in CHECKS:
    run(check_name, check_fn)

failed = [name for status, name in results if status == "FAIL"]
print(
    "pika %s: %d passed, %d failed, %d skipped"
    % (
        pika.__version__,
        sum(s == "PASS" for s, _ in results),
        len(failed),
        sum(s == "SKIP" for s, _ in results),
    )
)
sys.exit(1 if failed else 0)
