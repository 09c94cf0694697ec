#!/usr/bin/env python3
"""The operators' console in a real browser (headless Chromium through
Selenium) against the real system, started here: PostgreSQL, Redis, two
shards, the orchestrator, the relay and the gateway (tests/console/stack.py).

    python3 tests/console/test_console.py [-v] [ConsoleTest.test_4_account_follows_live]

Environment: TALLY_TEST_BIN_DIR (the programs, default build/ci);
TALLY_CONSOLE_DIR (the gateway serves the console from this directory
instead of its built-in copy, --console.dir); TALLY_SCREENSHOT_DIR (default
build/ci/console-screenshots; the services' logs go next to it, in
console-logs). Every wait has a deadline; nothing sleeps to synchronise."""
import base64
import os
import subprocess
import sys
import time
import unittest
from datetime import datetime, timedelta, timezone

try:
    from selenium import webdriver
except ImportError:  # Debian's python3-selenium is installed for /usr/bin/python3, not for another python3 on PATH
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stack import ROOT, TENANT, Stack, raise_on_sigterm, request, shard_of  # noqa: E402

SCREENSHOTS = os.environ.get("TALLY_SCREENSHOT_DIR", os.path.join(ROOT, "build", "ci", "console-screenshots"))
LOGS = os.path.join(os.path.dirname(os.path.abspath(SCREENSHOTS)), "console-logs")
WIDTH, HEIGHT = 1366, 768  # a laptop screen
OPERATOR_ZONE = "Asia/Kolkata"  # UTC+05:30 all year
RUN = str(int(time.time()))  # account and biz ids of this run


def progress(text):
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def account_on(shard, name):
    """A fresh account id of this run that the routing puts on `shard`."""
    n = 0
    while shard_of(f"{name}-{RUN}-{n}") != shard:
        n += 1
    return f"{name}-{RUN}-{n}"


class ConsoleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(SCREENSHOTS, exist_ok=True)
        for old in os.listdir(SCREENSHOTS):  # a failure's screenshot from an earlier run would mislead
            if old.startswith("failed-") and old.endswith(".png"):
                os.remove(os.path.join(SCREENSHOTS, old))
        progress(f"starting the system from {os.environ.get('TALLY_TEST_BIN_DIR', 'build/ci')} (logs in {LOGS})")
        cls.stack = Stack(log_dir=LOGS, log=progress)
        cls.addClassCleanup(cls.stack.stop)
        cls.stack.start()
        cls.base = f"http://127.0.0.1:{cls.stack.gateway_port}"
        cls.console_status = request(cls.stack.gateway_port, "GET", "/console/").status
        options = Options()
        options.binary_location = os.environ.get("TALLY_CHROMIUM", "/usr/bin/chromium")
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    f"--window-size={WIDTH},{HEIGHT}"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # The operator is not on UTC, so local times and their UTC titles differ.
        service = Service(os.environ.get("TALLY_CHROMEDRIVER", "/usr/bin/chromedriver"),
                          env={**os.environ, "TZ": OPERATOR_ZONE})
        cls.driver = webdriver.Chrome(service=service, options=options)
        cls.addClassCleanup(cls.driver.quit)
        # The page's viewport is the laptop screen, whatever the window's frame takes.
        cls.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})

    def setUp(self):
        if self.stack.exited():
            self.skipTest("a service died in an earlier test")
        self.assertEqual(self.console_status, 200, "the gateway does not serve /console/ "
                         "(build it with the console, or set TALLY_CONSOLE_DIR to serve gateway/console)")

    def tearDown(self):
        exited = self.stack.exited()
        if exited:
            self.fail("a service died during the test:\n" + "\n".join(exited))

    # -- helpers -----------------------------------------------------------------
    def api(self, method, path, body=None, key=None, expect=(200, 201, 202)):
        r = self.stack.api(method, path, body, key)
        self.assertIn(r.status, expect, f"{method} {path}: {r}")
        return r.json()

    def saga_until(self, saga_id, done, what, timeout=40):
        """Polls the operator's view of a saga until done(saga) holds."""
        deadline = time.monotonic() + timeout
        while True:
            saga = self.api("GET", f"/v1/admin/sagas/{saga_id}", key=self.stack.operator_key)
            if done(saga):
                return saga
            if time.monotonic() > deadline:
                self.fail(f"{saga_id} never {what} within {timeout} s; last seen {saga['state']}: {saga['steps']}")
            time.sleep(0.2)  # the poll's interval; the deadline above decides

    def funded(self, shard, name, amount=100):
        account = account_on(shard, name)
        self.api("POST", "/v1/accounts", {"account_id": account})
        saga = self.api("POST", "/v1/credits?wait_ms=5000",
                        {"account_id": account, "amount": amount, "biz_id": f"fund-{account}"})
        self.assertEqual(saga["state"], "completed")
        return account

    def failing_shard(self, shard):
        """Every commit on the shard fails until the test ends (or disarm() is called)."""
        self.stack.arm_failpoint(shard, "before_commit=error")
        disarm = lambda: self.stack.arm_failpoint(shard, "before_commit=off")  # noqa: E731
        self.addCleanup(disarm)
        return disarm

    def stuck_transfer(self, name, amount):
        """A transfer from a funded account on shard 0 into a new one on shard 1,
        whose shard fails every commit until disarm() is called."""
        source, destination = self.funded(0, f"{name}-src"), account_on(1, f"{name}-dst")
        self.api("POST", "/v1/accounts", {"account_id": destination})
        disarm = self.failing_shard(1)
        saga = self.api("POST", "/v1/transfers", {"from_account": source, "to_account": destination, "amount": amount,
                                                  "biz_id": f"{name}-{RUN}", "timeout_ms": 300000})
        return source, destination, saga["saga_id"], disarm

    def wait(self, condition, what, timeout=20):
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1,
                                 ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
                                 ).until(lambda d: condition(d))
        except TimeoutException:
            self.dump(f"failed-{self._testMethodName}")
            raise self.failureException(f"the console never showed {what} within {timeout} s") from None

    def dump(self, name):
        self.screenshot(name)
        for entry in self.driver.get_log("browser"):
            progress(f"browser: {entry['level']} {entry['message']}")
        main = self.driver.find_elements(By.ID, "main")
        progress("page text: " + (main[0].text[:2000] if main else self.driver.page_source[:2000]))

    def screenshot(self, name):
        """The whole page at the laptop's width, as a PNG."""
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": WIDTH, "height": min(max(height, HEIGHT), 4000), "scale": 1}})
        path = os.path.join(SCREENSHOTS, f"{name}.png")
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        progress(f"screenshot {path}")

    def text(self, css):
        found = self.driver.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found else ""

    def shown_state(self):
        badges = self.driver.find_elements(By.CSS_SELECTOR, "h1 [data-state]")
        return badges[0].get_attribute("data-state") if badges else None

    def open(self, route):
        """The console at `route`, read afresh (the same address again would change nothing)."""
        url = f"{self.base}/console/#{route}"
        if self.driver.current_url == url:
            self.driver.refresh()
        else:
            self.driver.get(url)

    def sign_in(self, key, route="/sagas"):
        """A fresh tab state (no key kept), then the sign-in form."""
        self.open(route)
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.refresh()
        field = self.wait(lambda d: d.find_element(By.ID, "key"), "the sign-in form")
        field.send_keys(key, Keys.ENTER)

    def signed_in(self, route):
        """The page at `route`, signed in with the operator key (kept by the tab from an earlier test)."""
        self.open(route)
        if not self.driver.execute_script("return sessionStorage.getItem('tally.operator_key')"):
            self.sign_in(self.stack.operator_key, route)

    def mark_page(self):
        """A mark that a reload or navigation away would wipe."""
        self.driver.execute_script("window.tallyTestMark = 'still here'")

    def assert_not_reloaded(self):
        self.assertEqual(self.driver.execute_script("return window.tallyTestMark"), "still here",
                         "the page was reloaded")

    def confirm(self, expected):
        """The confirmation dialog is open and says `expected`; accept it."""
        dialog = self.driver.find_element(By.ID, "confirm")
        self.wait(lambda d: dialog.is_displayed(), "the confirmation dialog")
        text = dialog.find_element(By.ID, "confirm-text").text
        for words in expected:
            self.assertIn(words, text)
        dialog.find_element(By.ID, "confirm-ok").click()
        self.wait(lambda d: not d.find_element(By.ID, "confirm").is_displayed(), "the dialog closing")

    def live(self):
        self.wait(lambda d: d.find_element(By.CSS_SELECTOR, ".live").get_attribute("data-status") == "live",
                  "the stream connected (Updates: live)")

    # -- scenarios ---------------------------------------------------------------
    def test_1_sign_in_shows_counts(self):
        self.funded(0, "counted")
        counts = self.api("GET", "/v1/admin/sagas/counts", key=self.stack.operator_key)
        progress(f"counts from the API: {counts}")
        self.sign_in(self.stack.operator_key)
        shown = self.wait(lambda d: d.find_element(By.CSS_SELECTOR, '[data-count="completed"]').text,
                          "the count of completed sagas")
        self.assertEqual(int(shown), counts["counts"]["completed"])
        for state in ("needs_attention", "overdue", "running", "failed"):
            self.assertTrue(self.text(f'[data-count="{state}"]').isdigit(), state)
        self.assertEqual(self.text("h1"), "Sagas")
        unlabelled = self.driver.execute_script(
            "return [...document.querySelectorAll('input, select')]"
            ".filter(e => !e.labels.length).map(e => e.outerHTML)")
        self.assertEqual(unlabelled, [], "every input has a label")
        self.screenshot("sagas")

    def test_2_retry_brings_a_stuck_saga_to_completed(self):
        _, destination, saga_id, disarm = self.stuck_transfer("retry", 10)
        progress(f"{saga_id}: its destination shard fails every commit; waiting for needs_attention (about 11 s)")
        self.saga_until(saga_id, lambda s: s["state"] == "needs_attention", "needed attention")
        disarm()
        progress("needs_attention; failpoint disarmed; finding it in the console's list")
        self.signed_in("/sagas")
        self.wait(lambda d: int(d.find_element(By.CSS_SELECTOR, '[data-count="needs_attention"]').text) >= 1,
                  "a saga counted as needing attention")
        link = self.wait(lambda d: d.find_element(By.LINK_TEXT, saga_id), f"{saga_id} in the list")
        self.screenshot("sagas-needs-attention")
        link.click()
        self.wait(lambda d: self.shown_state() == "needs_attention", "the saga needing attention")
        self.live()
        self.assertIn("credit_destination", self.text("table.attempts"))
        self.screenshot("saga-needs-attention")
        self.mark_page()
        self.driver.find_element(By.XPATH, "//button[normalize-space()='Retry']").click()
        self.confirm([f"Retry transfer {saga_id}", "credit_destination"])
        self.wait(lambda d: self.shown_state() == "completed", "the saga completed", timeout=30)
        self.assert_not_reloaded()
        self.wait(lambda d: "succeeded" in d.find_element(By.CSS_SELECTOR, "table.attempts").text,
                  "the successful attempt in the timeline")
        self.assertEqual(self.api("GET", f"/v1/accounts/{destination}?consistency=strong")["balance"], 10)
        self.screenshot("saga-completed-after-retry")

    def test_3_abort_before_the_pivot_compensates(self):
        source, destination, saga_id, disarm = self.stuck_transfer("abort", 30)
        self.saga_until(saga_id, lambda s: s["steps"][0]["state"] == "succeeded" and s["steps"][1]["attempts"] >= 2,
                        "held the source and tried the destination twice")
        self.signed_in("/sagas")
        box = self.wait(lambda d: d.find_element(By.ID, "goto-id"), "the id box")
        box.send_keys(saga_id, Keys.ENTER)
        self.wait(lambda d: self.shown_state() in ("running", "needs_attention"), "the running transfer")
        self.live()
        self.mark_page()
        abort = self.driver.find_element(By.XPATH, "//button[normalize-space()='Abort']")
        abort.click()
        # Escape cancels, and nothing happens.
        self.wait(lambda d: d.find_element(By.ID, "confirm").is_displayed(), "the confirmation dialog")
        self.driver.switch_to.active_element.send_keys(Keys.ESCAPE)
        self.wait(lambda d: not d.find_element(By.ID, "confirm").is_displayed(), "the dialog cancelled by Escape")
        self.assertEqual(self.driver.switch_to.active_element, abort, "focus returns to the Abort button")
        self.assertIn(self.api("GET", f"/v1/admin/sagas/{saga_id}", key=self.stack.operator_key)["state"],
                      ("running", "needs_attention"))
        abort.send_keys(Keys.ENTER)
        self.confirm([f"Abort transfer {saga_id}: compensate every step already taken",
                      f"release the hold on {source}"])
        # Its destination still fails, so the undo of the credit waits: compensating until the shard recovers.
        self.wait(lambda d: self.shown_state() in ("compensating", "needs_attention", "compensated"),
                  "the abort accepted")
        disarm()
        self.wait(lambda d: self.shown_state() == "compensated", "the saga compensated", timeout=30)
        self.assert_not_reloaded()
        steps = self.driver.find_element(By.XPATH, "//table[caption='Steps, in order']").text
        self.assertRegex(steps, r"hold_source\s+compensated")
        comp = self.wait(lambda d: d.find_element(By.XPATH, "//table[contains(caption, 'compensations')]"),
                         "the compensations table")
        self.assertIn(source, comp.text)
        self.assertIn("aborted", self.text("#main dl"))
        account = self.api("GET", f"/v1/accounts/{source}?consistency=strong")
        self.assertEqual((account["balance"], account["held"]), (100, 0))
        self.screenshot("saga-aborted")

    def test_4_account_follows_live(self):
        account = self.funded(0, "live", amount=25)
        self.signed_in(f"/account/{account}")
        self.wait(lambda d: d.find_element(By.ID, "balance").get_attribute("data-value") == "25", "the balance 25")
        self.live()
        self.mark_page()
        credit = self.api("POST", "/v1/credits", {"account_id": account, "amount": 40, "biz_id": f"live-{RUN}",
                                                  "expires_at": "2099-01-01T00:00:00Z"})
        self.wait(lambda d: d.find_element(By.ID, "balance").get_attribute("data-value") == "65", "the new balance 65")
        self.assert_not_reloaded()
        self.wait(lambda d: d.find_elements(By.LINK_TEXT, credit["saga_id"]), "the credit's saga among the entries")
        self.assertIn("2099", self.text("#main table"))  # the new lot's expiry
        # Times in the operator's zone, the UTC value on hover.
        self.assertIn("UTC+05:30", self.text("#zone"))
        shown = self.driver.find_element(By.CSS_SELECTOR, "#main table time")
        utc = shown.get_attribute("datetime")
        self.assertEqual(shown.get_attribute("title"), f"{utc} (UTC)")  # the API's times have milliseconds, as JS's
        local = datetime.fromisoformat(utc.replace("Z", "+00:00")).astimezone(timezone(timedelta(hours=5, minutes=30)))
        self.assertEqual(shown.text, local.strftime("%Y-%m-%d %H:%M:%S.") + f"{local.microsecond // 1000:03d}")
        self.screenshot("account")

    def test_5_app_key_is_refused_clearly(self):
        self.sign_in(self.stack.app_key)
        message = self.wait(lambda d: d.find_element(By.CSS_SELECTOR, ".refusal").text, "why the app key is refused")
        self.assertIn("it is an app key", message)
        self.assertIn("forbidden", message)
        self.assertIsNone(self.driver.execute_script("return sessionStorage.getItem('tally.operator_key')"))
        self.screenshot("app-key-refused")
        field = self.driver.find_element(By.ID, "key")
        field.clear()
        field.send_keys("tk_nobody_" + RUN, Keys.ENTER)
        self.wait(lambda d: "unauthorized" in d.find_element(By.CSS_SELECTOR, ".refusal").text,
                  "the unknown key refused")

    def test_6_reconciliation_finds_freezes_and_unfreezes(self):
        frozen = self.funded(0, "frozen")
        self.api("POST", f"/v1/admin/accounts/{frozen}/freeze", {}, key=self.stack.operator_key)
        tampered = self.funded(0, "tampered")
        self.stack.sql("shard_0", "UPDATE account SET balance = balance + 7 "
                       f"WHERE tenant = '{TENANT}' AND account_id = '{tampered}'")
        self.signed_in("/reconciliation")
        row = "//table[caption='Accounts whose writes are refused']//tr[td//a[text()='{}']]".format
        self.wait(lambda d: d.find_element(By.XPATH, row(frozen)), f"{frozen} among the frozen accounts")
        self.assertFalse(self.driver.find_elements(By.XPATH, row(tampered)))
        # A change by hand writes no entry: the full run reads every account.
        self.driver.find_element(By.XPATH, "//button[normalize-space()='Full run on s0']").click()
        self.confirm(["Reconcile shard s0 now", "whole ledger", "FROZEN"])
        self.wait(lambda d: "(full)" in d.find_element(By.CSS_SELECTOR, ".notice").text
                  and "1 difference(s), 1 account(s) frozen" in d.find_element(By.CSS_SELECTOR, ".notice").text,
                  "the full run's outcome: one difference, frozen")
        report = self.wait(lambda d: d.find_element(By.XPATH, "//table[contains(caption, 'shard s0')]//tbody/tr"),
                           "the run among shard s0's reports")
        self.assertIn(tampered, report.text)
        self.assertIn("full", report.text)
        # The next incremental run checks the account that differed again.
        self.driver.find_element(By.XPATH, "//button[normalize-space()='Run now on s0']").click()
        self.confirm(["Reconcile shard s0 now", "written since the last run", "FROZEN"])
        self.wait(lambda d: "(incremental)" in d.find_element(By.CSS_SELECTOR, ".notice").text
                  and "1 difference(s)" in d.find_element(By.CSS_SELECTOR, ".notice").text,
                  "the incremental run finds it again")
        self.wait(lambda d: "incremental since" in d.find_element(
            By.XPATH, "//table[contains(caption, 'shard s0')]//tbody/tr").text, "the incremental run's report")
        # A full audit in the background: started, its progress read until it completes.
        self.driver.find_element(By.XPATH, "//button[normalize-space()='Start full audit on s1']").click()
        self.confirm(["Audit shard s1 in the background", "FROZEN"])
        self.wait(lambda d: "audit" in d.find_element(By.CSS_SELECTOR, ".notice").text
                  and "started over" in d.find_element(By.CSS_SELECTOR, ".notice").text, "the audit started")
        audits = "//table[caption='Full audits of shard s1, newest first']//tbody/tr"
        self.wait(lambda d: "completed" in d.find_element(By.XPATH, audits).text
                  and "(100.0 %)" in d.find_element(By.XPATH, audits).text, "the audit completed, every account checked")
        self.wait(lambda d: d.find_element(By.XPATH, row(tampered)), f"{tampered} frozen by the run")
        self.screenshot("reconciliation")
        self.driver.find_element(By.XPATH, row(frozen) + "//button").click()
        self.confirm([f"Unfreeze account {frozen}", "writes to it are accepted again"])
        self.wait(lambda d: not d.find_elements(By.XPATH, row(frozen)), f"{frozen} no longer frozen")
        self.assertEqual(self.api("GET", f"/v1/accounts/{frozen}?consistency=strong")["status"], "active")
        self.assertEqual(self.api("GET", f"/v1/accounts/{tampered}?consistency=strong")["status"], "frozen")

    def test_7_health_shows_services_and_rates(self):
        self.signed_in("/health")
        services = self.wait(lambda d: d.find_element(By.XPATH, "//table[caption='Services']"), "the services")
        for name in ("gateway", "orchestrator", "shard 0", "shard 1", "relay"):
            self.assertRegex(services.text, rf"{name}\s+ready")
        # Rates need a second reading, a few seconds later.
        self.wait(lambda d: "/s" in d.find_element(By.XPATH, "//dt[text()='Sagas started']/../dd").text,
                  "a rate of started sagas", timeout=15)
        self.screenshot("health")

    def test_9_health_shows_the_replicated_databases(self):
        """Run by scripts/test beside the replicated cluster (TALLY_TEST_HA_MONITOR):
        the Health page shows each formation as its monitor does."""
        monitor = os.environ.get("TALLY_TEST_HA_MONITOR")
        if not monitor:
            self.skipTest("no replicated cluster (scripts/test runs this test beside one)")
        truth = subprocess.run(
            ["psql", monitor, "-XAtq", "-F", " ", "-c",
             "SELECT formationid, nodename FROM pgautofailover.node"
             " WHERE reportedstate = 'primary' AND goalstate = 'primary' ORDER BY formationid"],
            check=True, capture_output=True, text=True).stdout.split()
        formation, primary = truth[0], truth[1]
        self.signed_in("/health")
        nodes = self.wait(lambda d: d.find_element(By.XPATH, f"//table[caption='Nodes of {formation}']"),
                          "the formation's nodes")
        self.assertEqual(len(nodes.find_elements(By.XPATH, ".//tbody/tr")), 3, nodes.text)
        self.assertRegex(nodes.text, rf"{primary}\s+\S+\s+primary\s+primary\s+good")
        fact = lambda name: self.driver.find_element(By.XPATH, f"//dt[text()='{name}']/../dd").text  # noqa: E731
        self.assertEqual(fact("Primary"), primary)
        self.assertEqual(fact("Takes writes"), "yes")
        self.assertEqual(fact("Synchronous standbys"), "2")
        self.screenshot("health-databases")

    def test_8_lists_are_newest_first_and_filter_by_account(self):
        account = self.funded(1, "listed")
        other = self.funded(0, "unlisted")
        moved = self.api("POST", "/v1/transfers?wait_ms=5000",
                         {"from_account": other, "to_account": account, "amount": 5, "biz_id": f"to-{account}"})
        self.assertEqual(moved["state"], "completed")
        newest = self.api("GET", "/v1/admin/sagas?limit=1", key=self.stack.operator_key)["sagas"][0]["saga_id"]
        self.assertEqual(newest, moved["saga_id"], "the API lists newest first")
        self.signed_in("/sagas")
        self.wait(lambda d: self.listed(), "the list of sagas")
        self.assertEqual(self.listed()[0], newest, "the console's list starts with the newest saga")
        field = self.driver.find_element(By.ID, "f-account")
        field.send_keys(account, Keys.ENTER)
        # The credit that funded the account and the transfer to it, newest first.
        self.wait(lambda d: "account=" in d.current_url and len(self.listed()) == 2, "the account's two sagas")
        self.assertEqual(self.listed()[0], moved["saga_id"])
        self.screenshot("sagas-by-account")

    def listed(self):
        """The saga ids of the list's table, in order."""
        rows = self.driver.find_elements(By.CSS_SELECTOR, "#list-title ~ .scroll tbody tr td:first-child a")
        return [a.text for a in rows]


def main():
    raise_on_sigterm()  # so that every process started is stopped on SIGTERM too
    try:
        result = unittest.main(exit=False, verbosity=2).result
    finally:
        ConsoleTest.doClassCleanups()  # already done unless the run was interrupted
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
