#!/usr/bin/env python3
"""The first hour of a new user, end to end, under a pseudo-terminal where a terminal matters.

Runs the real tomod and tomo binaries (paths as arguments) and checks: tomod --help and
--version; connection errors' wording and the server address forms; `--json` on every tomo
command, parsed; the progress bar's content and width on a terminal and plain lines without
one; Ctrl-C during `submit --wait`: the prompt in a terminal and its outcome for the job, and
--on-interrupt when there is no terminal.

    first_hour_test.py TOMOD TOMO
"""
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
import unittest

TOMOD, TOMO = sys.argv[1], sys.argv[2]
del sys.argv[1:3]


def run(*args, timeout=120, env=None):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env)


class PtyProcess:
    """A child on a pseudo-terminal of the given size; its output read as it comes."""

    def __init__(self, argv, columns=120, rows=40):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.output = b""

    def read_until(self, pattern, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if re.search(pattern, self.output):
                return True
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                self.output += data
        return re.search(pattern, self.output) is not None

    def send(self, data):
        os.write(self.fd, data)

    def wait(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            self.read_until(b"$^", 0.2)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.read_until(b"$^", 0.2)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        return None

    def text(self):
        return self.output.decode(errors="replace")


class FirstHourTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tomo-first-hour-")
        port_file = os.path.join(cls.dir, "port")
        cls.tomod_log = open(os.path.join(cls.dir, "tomod.log"), "w")
        cls.tomod = subprocess.Popen(
            [TOMOD, "--listen=127.0.0.1:0", "--port_file=" + port_file, "--metrics_port=0",
             "--spool_dir=" + os.path.join(cls.dir, "spool")],
            stdout=cls.tomod_log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        cls.server = "127.0.0.1:" + open(port_file).read().strip()
        # A quick 2D case and a slow one (SIRT with many iterations on the CPU: a minute or
        # more, always cancelled).
        cls.quick = os.path.join(cls.dir, "quick")
        cls.slow = os.path.join(cls.dir, "slow")
        for out, args in ((cls.quick, ["--size", "24", "--views", "30"]),
                          (cls.slow, ["--size", "96", "--views", "120", "--algorithm", "sirt",
                                      "--iterations", "1000"])):
            made = run(TOMO, "phantom", "--out-dir", out, *args)
            assert made.returncode == 0, made.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tomod.send_signal(signal.SIGTERM)
        try:
            cls.tomod.wait(60)
        except subprocess.TimeoutExpired:
            cls.tomod.kill()
        cls.tomod_log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tomo(self, *args, **kwargs):
        return run(TOMO, "--server", self.server, *args, **kwargs)

    def job_state(self, job_id):
        status = self.tomo("status", job_id, "--json")
        self.assertEqual(status.returncode, 0, status.stderr)
        return json.loads(status.stdout)["state"]

    def wait_for_state(self, job_id, states, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            state = self.job_state(job_id)
            if state in states:
                return state
            time.sleep(0.2)
        return self.job_state(job_id)

    # ------------------------------------------------------------------ tomod's own help

    def test_tomod_help_and_version(self):
        helped = run(TOMOD, "--help")
        self.assertEqual(helped.returncode, 0, helped.stderr)
        for group in ("Serving:", "Devices and memory:", "Limits:", "Spool and retention:"):
            self.assertIn(group, helped.stdout)
        for flag in ("--listen", "--spool_dir", "--max_iterations", "--drain_timeout"):
            self.assertIn(flag, helped.stdout)
        self.assertNotIn("absl", helped.stdout)  # no library flags, no source paths
        self.assertNotIn(".cc", helped.stdout)
        self.assertNotIn("No flags matched", helped.stdout)
        version = run(TOMOD, "--version")
        self.assertEqual(version.returncode, 0)
        tomo_version = run(TOMO, "--version")
        # One version string: "tomod 0.1.0 (commit ...)" and "tomo 0.1.0 (commit ...)" (the
        # commits agree once both are built from one tree).
        self.assertRegex(version.stdout, r"^tomod \d+\.\d+\.\d+ \(commit \w+")
        self.assertEqual(version.stdout.split(" ")[1], tomo_version.stdout.split(" ")[1])

    # ------------------------------------------------------------------ connections

    def test_connection_errors_say_what_to_check(self):
        for address, target in (("127.0.0.1:1", "127.0.0.1:1"),
                                ("http://127.0.0.1:1", "127.0.0.1:1"),
                                ("grpc://localhost:1/", "localhost:1")):
            for command in (["list"], ["submit", "--spec", self.quick + "/job.json", "--data",
                                       self.quick + "/sinogram.raw"]):
                start = time.time()
                r = run(TOMO, "--server", address, *command)
                elapsed = time.time() - start
                self.assertEqual(r.returncode, 6, r.stderr)
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn("cannot reach tomod at " + target, lines[0])
                self.assertIn("is tomod running there? --server or TOMO_SERVER", lines[0])
                self.assertNotIn("UNKNOWN", lines[0])
                self.assertNotIn("ipv4:", lines[0])
                self.assertLess(elapsed, 2.0, command)  # submit fails as fast as list
        # A bare host means port 50051; a bad address is a usage error.
        r = run(TOMO, "--server", "127.0.0.1", "list",
                env=dict(os.environ, TOMO_SERVER="ignored:1"))
        self.assertIn("127.0.0.1:50051", r.stderr)
        r = run(TOMO, "list", env=dict(os.environ, TOMO_SERVER="host:notaport"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('port "notaport"', r.stderr)

    # ------------------------------------------------------------------ --json

    def test_json_on_every_command(self):
        out = os.path.join(self.dir, "json")
        spec, data = self.quick + "/job.json", self.quick + "/sinogram.raw"
        submitted = json.loads(self.tomo("--json", "submit", "--spec", spec, "--data", data,
                                         "--wait", "--out", out + "/wait").stdout)
        self.assertEqual(submitted["state"], "SUCCEEDED")
        self.assertEqual(submitted["files"], [out + "/wait/volume.raw", out + "/wait/volume.json"])
        job_id = json.loads(self.tomo("submit", "--json", "--spec", spec, "--data", data).stdout)["jobId"]
        events = [json.loads(line) for line in self.tomo("watch", job_id, "--json").stdout.splitlines()]
        self.assertGreaterEqual(len(events), 1)
        self.assertTrue(all(e["jobId"] == job_id for e in events))
        self.assertEqual(events[-1]["state"], "JOB_STATE_SUCCEEDED")
        self.assertEqual(json.loads(self.tomo("status", job_id, "--json").stdout)["id"], job_id)
        listed = json.loads(self.tomo("list", "--json").stdout)
        self.assertIn(job_id, [j["id"] for j in listed["jobs"]])
        self.assertIn("version", json.loads(self.tomo("info", "--json").stdout))
        fetched = json.loads(self.tomo("fetch", job_id, "--out", out + "/f", "--json").stdout)
        self.assertEqual(fetched["files"], [out + "/f/volume.raw", out + "/f/volume.json"])
        compared = json.loads(run(TOMO, "compare", "--json", "--reference",
                                  self.quick + "/truth.raw", "--image",
                                  out + "/f/volume.raw").stdout)
        self.assertEqual(compared["dims"], [1, 24, 24])  # read from volume.json
        self.assertLess(compared["rmse"], 0.1)
        local = json.loads(run(TOMO, "local", "--json", "--spec", spec, "--data", data,
                               "--out", out + "/local", "--format", "raw,png").stdout)
        self.assertIn(out + "/local/volume.raw", local["files"])
        phantom = json.loads(run(TOMO, "phantom", "--json", "--out-dir", out + "/ph",
                                 "--size", "8", "--views", "8").stdout)
        self.assertEqual(len(phantom["files"]), 3)
        generated = json.loads(run(TOMO, "spec", "--json", "--geometry", "cone",
                                   "--algorithm", "sirt").stdout)
        self.assertEqual(generated["algorithm"]["sirt"]["iterations"], 50)
        validated = json.loads(run(TOMO, "validate", "--json", spec).stdout)
        self.assertTrue(validated["valid"])
        preview = json.loads(run(TOMO, "preview", "--json", out + "/f/volume.raw").stdout)
        self.assertEqual(len(preview["files"]), 3)
        cancelled = self.tomo("cancel", "--json", job_id)
        self.assertEqual(cancelled.returncode, 1)  # it has SUCCEEDED: one error line, no JSON
        self.assertEqual(cancelled.stdout, "")
        deleted = json.loads(self.tomo("delete", "--json", job_id).stdout)
        self.assertEqual(deleted, {"jobId": job_id, "deleted": True})

    # ------------------------------------------------------------------ progress

    def test_progress_bar_on_a_terminal(self):
        out = os.path.join(self.dir, "bar")
        for columns in (200, 60):
            child = PtyProcess([TOMO, "--server", self.server, "submit", "--spec",
                                self.slow + "/job.json", "--data", self.slow + "/sinogram.raw",
                                "--wait", "--out", out, "--on-interrupt", "cancel"],
                               columns=columns)
            self.assertTrue(child.read_until(rb"running \d+/1000", 120), child.text())
            # Let a few iterations pass so that the ETA shows.
            self.assertTrue(child.read_until(rb"ETA \d+:\d\d", 60), child.text())
            child.send(b"\x03")
            self.assertEqual(child.wait(), 130, child.text())
            text = child.text()
            frames = [f for f in re.split(r"[\r\n]", text) if f.startswith("[")]
            self.assertTrue(frames, text)
            # The bar, the percentage, the label with k/n, elapsed time and ETA; on a
            # narrow terminal every frame fits its width (the label cut, not the times).
            self.assertTrue(any(re.search(r"^\[[#.]+\] +\d+%  uploading .*B/s", f) or
                                re.search(r"^\[[#.]+\] +\d+%  uploading", f) for f in frames), text)
            running = [f for f in frames if "running" in f and "ETA" in f]
            self.assertTrue(running, text)
            self.assertRegex(running[-1], r"\d+:\d\d  ETA \d+:\d\d")
            for frame in frames:
                visible = frame.replace("\x1b[K", "").replace("^C", "")  # the terminal's echo
                self.assertLessEqual(len(visible), columns, repr(visible))
            if columns == 200:
                self.assertRegex(running[-1], r"running \d+/1000 sirt")

    def test_plain_progress_lines_without_a_terminal(self):
        r = self.tomo("submit", "--spec", self.quick + "/job.json", "--data",
                      self.quick + "/sinogram.raw", "--wait", "--out", self.dir + "/plain")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stderr.splitlines()
        self.assertTrue(lines)
        for line in lines:
            self.assertTrue(line.startswith("progress: "), r.stderr)
        self.assertNotIn("\r", r.stderr)
        self.assertNotIn("\x1b", r.stderr)
        self.assertTrue(any("uploading" in l for l in lines), r.stderr)
        self.assertTrue(any("succeeded" in l for l in lines), r.stderr)
        quiet = self.tomo("-q", "submit", "--spec", self.quick + "/job.json", "--data",
                          self.quick + "/sinogram.raw", "--wait", "--out", self.dir + "/q")
        self.assertEqual(quiet.stderr, "")

    # ------------------------------------------------------------------ Ctrl-C

    def start_slow_under_pty(self, *extra):
        child = PtyProcess([TOMO, "--server", self.server, "submit", "--spec",
                            self.slow + "/job.json", "--data", self.slow + "/sinogram.raw",
                            "--wait", "--out", os.path.join(self.dir, "ctrlc"), *extra])
        self.assertTrue(child.read_until(rb"running", 120), child.text())
        job_id = re.search(rb"(\d{8}-\d{6}-\d{6}-[0-9a-f]+)", child.output).group(1).decode()
        return child, job_id

    def test_ctrl_c_asks_and_cancels_when_told_yes(self):
        child, job_id = self.start_slow_under_pty()
        child.send(b"\x03")
        self.assertTrue(child.read_until(rb"\[y/N\] ", 30), child.text())
        text = child.text()
        self.assertIn("tomo watch " + job_id, text)
        self.assertIn("tomo cancel " + job_id, text)
        child.send(b"y\n")
        self.assertEqual(child.wait(), 130, child.text())
        self.assertEqual(self.wait_for_state(job_id, {"JOB_STATE_CANCELLED"}),
                         "JOB_STATE_CANCELLED")

    def test_ctrl_c_keeps_the_job_when_told_no(self):
        child, job_id = self.start_slow_under_pty()
        child.send(b"\x03")
        self.assertTrue(child.read_until(rb"\[y/N\] ", 30), child.text())
        child.send(b"n\n")
        self.assertEqual(child.wait(), 130, child.text())
        self.assertIn("left running", child.text())
        time.sleep(1)
        self.assertEqual(self.job_state(job_id), "JOB_STATE_RUNNING")
        self.assertEqual(self.tomo("cancel", "--wait", job_id).returncode, 0)

    def test_interrupt_without_a_terminal_follows_the_flag(self):
        for flag, expected in (("keep", "JOB_STATE_RUNNING"), ("cancel", "JOB_STATE_CANCELLED")):
            child = subprocess.Popen(
                [TOMO, "--server", self.server, "submit", "--spec", self.slow + "/job.json",
                 "--data", self.slow + "/sinogram.raw", "--wait", "--out",
                 os.path.join(self.dir, "nottyi"), "--on-interrupt", flag],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            job_id = child.stdout.readline().strip()  # printed as soon as it is committed
            self.assertRegex(job_id, r"^\d{8}-")
            self.wait_for_state(job_id, {"JOB_STATE_RUNNING"})
            child.send_signal(signal.SIGINT)
            _, err = child.communicate(timeout=60)
            self.assertEqual(child.returncode, 130, err)
            self.assertIn("tomo watch " + job_id, err)
            self.assertNotIn("[y/N]", err)
            time.sleep(0.5)
            self.assertEqual(self.wait_for_state(job_id, {expected}, timeout=30), expected)
            self.tomo("cancel", "--wait", job_id)


if __name__ == "__main__":
    unittest.main(verbosity=2)
