"""A bank workload in the style of Jepsen's, through the public API: many
clients write credits (half of them expiring within seconds, so lots expire
all through the run), immediate and held deductions (then confirmed,
cancelled or left to time out), refunds, cross-shard transfers (a fifth of
them on one hot account), batch deductions and revokes of their items (one
item by an amount, what is left of one item, or of all). Every request and its outcome
is recorded, unknown outcomes included; a request without an answer is
resent with the same biz_id, as the API asks."""
import random
import threading
import time

TERMINAL = {"completed", "failed", "compensated"}
WEIGHTS = [("credit", 12), ("deduct", 12), ("held", 14), ("refund", 8), ("transfer", 36), ("batch", 8), ("revoke", 4),
           ("replay", 8)]
OPENING = 10_000
EXPIRING_SHARE = 0.5   # of the credits: their lot expires 1-8 s after the request


def expires_at(rng):
    """1-8 s ahead on this machine's clock, in whole seconds, as RFC 3339 UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(time.time()) + rng.randint(2, 8)))


class History:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = []
        self.refundable = []   # (saga_id, amount, kind) of completed deductions and transfers
        self.revocable = []    # (saga_id, items) of completed batch deductions
        self.replayable = []   # ops answered with a saga, for idempotent replays

    def add(self, op):
        with self.lock:
            self.ops.append(op)
            if op.get("final_state") == "completed" and op["kind"] in ("deduct", "transfer"):
                self.refundable.append((op["saga_id"], op["body"]["amount"], op["kind"]))
            if op.get("final_state") == "completed" and op["kind"] == "batch":
                self.revocable.append((op["saga_id"], op["body"]["items"]))
            if op.get("saga_id") and op["kind"] != "replay":
                self.replayable.append(op)

    def pick(self, rng, which):
        with self.lock:
            items = getattr(self, which)
            return rng.choice(items) if items else None

    def snapshot(self):
        with self.lock:
            return list(self.ops)


class Workload:
    def __init__(self, api, accounts, seed, clients=12, wait_ms=3000, resend_for_s=30.0):
        self.api = api
        self.accounts = accounts        # accounts[0] is the hot one
        self.seed, self.clients, self.wait_ms, self.resend_for_s = seed, clients, wait_ms, resend_for_s
        self.history = History()
        self.stop = threading.Event()
        self.threads = []

    # -- one request, resent until it has an answer -------------------------
    def submit(self, path, body, kind):
        """POSTs until an answer that is not 503/429/none, or resend_for_s ends."""
        op = {"kind": kind, "biz_id": body.get("biz_id"), "body": body, "t0": time.time(), "attempts": 0,
              "statuses": []}
        deadline = time.time() + self.resend_for_s
        while True:
            op["attempts"] += 1
            r = self.api.post(f"{path}?wait_ms={self.wait_ms}", body)
            op["statuses"].append(r.status)
            if r.status in (200, 201, 202) and isinstance(r.body, dict) and "saga_id" in r.body:
                op["saga_id"] = r.body["saga_id"]
                op["saga_type"] = r.body.get("type")
                op["acked_state"] = r.body.get("state")
                op["replayed"] = r.headers.get("idempotent-replayed") == "true"
                break
            if r.status is not None and r.status not in (429, 503):
                op["rejected"] = r.status
                op["code"] = r.error_code
                if r.error_code == "idempotency_conflict":
                    op["conflict"] = True
                break
            if time.time() > deadline:
                op["unknown"] = True
                break
            time.sleep(float(r.headers.get("retry-after", "0.2")) if r.status == 429 else 0.2)
        op["t1"] = time.time()
        return op

    def settle(self, op):
        """Reads a pending saga until it is terminal (bounded), to know its outcome."""
        state = op.get("acked_state")
        deadline = time.time() + 15
        while state not in TERMINAL and state != "awaiting_confirmation" and time.time() < deadline \
                and not self.stop.is_set():
            r = self.api.get(f"/v1/sagas/{op['saga_id']}?wait_ms=2000")
            if r.status == 200 and isinstance(r.body, dict):
                state = r.body.get("state")
            else:
                time.sleep(0.2)
        return state

    def refunded(self, saga_id):
        """What a completed refund saga gave back (its "refunded"), or None."""
        deadline = time.time() + 15
        while time.time() < deadline and not self.stop.is_set():
            r = self.api.get(f"/v1/sagas/{saga_id}?consistency=strong")
            if r.status == 200 and isinstance(r.body, dict) and "refunded" in r.body:
                return r.body["refunded"]["amount"]
            time.sleep(0.2)
        return None

    def record(self, op, effect, state=None):
        op["effect"] = effect
        if op.get("rejected"):
            op["final_state"] = "rejected"
        elif state in TERMINAL:
            op["final_state"] = state
            op["acked_state"] = state  # read from the authority: a promise as much as an answer
        op["t1"] = time.time()
        self.history.add(op)
        return op

    # -- the operations -------------------------------------------------------
    def account(self, rng, hot_share=0.2):
        return self.accounts[0] if rng.random() < hot_share else rng.choice(self.accounts[1:])

    def run_one(self, rng, kind, tag):
        biz = f"{kind}-{self.seed}-{tag}"
        if kind == "credit":
            a = rng.randint(1, 200)  # about what the deductions take, so balances neither drain nor pile up
            body = {"account_id": self.account(rng), "amount": a, "biz_id": biz}
            if rng.random() < EXPIRING_SHARE:
                body.update(expires_at=expires_at(rng), rule_version="2")
            op = self.submit("/v1/credits", body, kind)
            if "expires_at" in body and op.get("code") == "invalid_request" and op["attempts"] > 1:
                # A resend after expires_at has passed writes nothing (400), but
                # the unanswered attempts before it may have: the outcome is unknown.
                del op["rejected"]
                op["unknown"] = True
            return self.record(op, a, self.settle(op) if op.get("saga_id") else None)
        if kind == "deduct":
            a = rng.randint(1, 80)
            op = self.submit("/v1/deductions", {"account_id": self.account(rng), "amount": a, "biz_id": biz}, kind)
            return self.record(op, -a, self.settle(op) if op.get("saga_id") else None)
        if kind == "held":
            a = rng.randint(1, 80)
            body = {"account_id": self.account(rng), "amount": a, "biz_id": biz,
                    "hold_timeout_ms": rng.randint(1500, 4000)}
            op = self.submit("/v1/deductions", body, kind)
            if not op.get("saga_id"):
                return self.record(op, -a)
            state = self.settle(op)
            if state == "awaiting_confirmation":
                choice = rng.random()
                if choice < 0.5:
                    self.decide(op, "confirm")
                elif choice < 0.75:
                    self.decide(op, "cancel")
                else:
                    op["left_to_time_out"] = True
                state = op.get("acked_state")  # the checker reads the end of the others
            return self.record(op, -a, state)
        if kind == "transfer":
            src = self.account(rng)
            dst = self.account(rng, 0.25 if src != self.accounts[0] else 0)
            while dst == src:
                dst = rng.choice(self.accounts[1:])
            body = {"from_account": src, "to_account": dst, "amount": rng.randint(1, 100), "biz_id": biz}
            if rng.random() < 0.2:
                body["timeout_ms"] = 3000
            op = self.submit("/v1/transfers", body, kind)
            return self.record(op, 0, self.settle(op) if op.get("saga_id") else None)
        if kind == "batch":
            items = [{"account_id": acc, "amount": rng.randint(1, 30)}
                     for acc in rng.sample(self.accounts, rng.randint(2, 5))]
            op = self.submit("/v1/batch-deductions", {"biz_id": biz, "items": items}, kind)
            return self.record(op, -sum(i["amount"] for i in items), self.settle(op) if op.get("saga_id") else None)
        if kind == "refund":
            original = self.history.pick(rng, "refundable")
            if original is None:
                return None
            saga_id, amount, original_kind = original
            body = {"original_saga_id": saga_id, "amount": rng.randint(1, amount), "biz_id": biz}
            op = self.submit("/v1/refunds", body, kind)
            op["original"] = saga_id
            # A refund of a deduction adds value; of a transfer, moves it back.
            return self.record(op, body["amount"] if original_kind == "deduct" else 0,
                               self.settle(op) if op.get("saga_id") else None)
        if kind == "revoke":
            original = self.history.pick(rng, "revocable")
            if original is None:
                return None
            saga_id, items = original
            body = {"original_saga_id": saga_id, "biz_id": biz}
            most = sum(i["amount"] for i in items)
            roll = rng.random()
            if roll < 2 / 3:
                item = rng.choice(items)
                body["account_id"] = item["account_id"]
                most = item["amount"]
                if roll < 1 / 3:
                    body["amount"] = most = rng.randint(1, item["amount"])
            op = self.submit("/v1/refunds", body, kind)
            op["original"] = saga_id
            state = self.settle(op) if op.get("saga_id") else None
            if state != "completed":
                return self.record(op, most, state)
            # What a revoke of what is left gave back only the saga says; if
            # it cannot be read, the outcome counts as unknown (0 to most).
            gave = self.refunded(op["saga_id"])
            return self.record(op, most if gave is None else gave, state if gave is not None else None)
        if kind == "replay":
            first = self.history.pick(rng, "replayable")
            if first is None:
                return None
            path = {"credit": "/v1/credits", "deduct": "/v1/deductions", "held": "/v1/deductions",
                    "transfer": "/v1/transfers", "batch": "/v1/batch-deductions", "refund": "/v1/refunds",
                    "revoke": "/v1/refunds"}[first["kind"]]
            op = self.submit(path, first["body"], "replay")
            op["biz_id"] = first["biz_id"]
            if op.get("saga_id") and op["saga_id"] != first["saga_id"]:
                op["replay_mismatch"] = f"replay answered {op['saga_id']}, first answer {first['saga_id']}"
            op["saga_id"] = None   # the first op carries the acknowledgement
            return self.record(op, 0)
        raise ValueError(kind)

    def decide(self, op, action):
        r = None
        deadline = time.time() + self.resend_for_s
        while time.time() < deadline:
            r = self.api.post(f"/v1/deductions/{op['saga_id']}/{action}?wait_ms={self.wait_ms}", {})
            if r.status not in (None, 429, 503):
                break
            time.sleep(0.2)
        op["decision"] = action
        op["decision_status"] = None if r is None else r.status
        if r is not None and r.status == 200 and isinstance(r.body, dict):
            op["acked_state"] = r.body.get("state")

    # -- set-up and the client threads ---------------------------------------
    def open_accounts(self):
        for acc in self.accounts:
            deadline = time.time() + 60
            while self.api.post("/v1/accounts", {"account_id": acc}).status not in (200, 201):
                if time.time() > deadline:
                    raise RuntimeError(f"could not open account {acc}")
                time.sleep(0.2)
            op = self.submit("/v1/credits", {"account_id": acc, "amount": OPENING, "biz_id": f"opening-{acc}"},
                             "credit")
            state = self.settle(op) if op.get("saga_id") else None
            if state != "completed":
                raise RuntimeError(f"opening credit of {acc} ended {state}")
            self.record(op, OPENING, state)

    def client(self, n):
        rng = random.Random(f"{self.seed}-{n}")
        kinds, weights = zip(*WEIGHTS)
        i = 0
        while not self.stop.is_set():
            i += 1
            self.run_one(rng, rng.choices(kinds, weights)[0], f"{n}-{i}")

    def start(self):
        for n in range(self.clients):
            t = threading.Thread(target=self.client, args=(n,), daemon=True, name=f"client-{n}")
            t.start()
            self.threads.append(t)

    def finish(self, timeout=120):
        self.stop.set()
        for t in self.threads:
            t.join(timeout)
