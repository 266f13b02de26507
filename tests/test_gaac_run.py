"""gaac-run driven through a pseudo-terminal: keys in, screen out (issue 4).

A turn streams a reply; Ctrl-C in the middle of a reply stops it and returns to the prompt with
the conversation kept; /clear forgets; Ctrl-D quits with status 0. Also the one-shot (-p) and
piped-stdin modes and --verbose's figures.
"""
import fcntl
import os
import pty
import re
import select
import subprocess
import sys
import termios
import time

import pytest

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    def __init__(self, argv):
        self.master, slave = pty.openpty()
        # The child gets its own session with the pty as controlling terminal, so that Ctrl-C
        # typed into the pty becomes SIGINT for it, as in a real terminal.
        def make_controlling_tty():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                                     preexec_fn=make_controlling_tty, env={**os.environ, "TERM": "dumb"})
        os.close(slave)
        self.screen = b""
        self.pos = 0  # end of the last match: output after it is not consumed yet

    def read_until(self, pattern: bytes, timeout: float = 180.0) -> bytes:
        """Reads output until `pattern` appears after the previous match; returns what lies
        between (bytes already read past a match stay available to the next call)."""
        start = self.pos
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = ANSI.sub(b"", self.screen[start:])
            i = text.find(pattern)
            if i >= 0:
                # Map the match back to raw screen offsets (ANSI codes are rare: TERM=dumb).
                raw = self.screen[start:]
                j = raw.find(pattern)
                self.pos = start + (j + len(pattern) if j >= 0 else len(raw))
                return self.screen[start:self.pos]
            r, _, _ = select.select([self.master], [], [], 0.2)
            if r:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:
                    break
        raise AssertionError(f"timed out waiting for {pattern!r}; screen so far:\n"
                             f"{self.screen[start:].decode(errors='replace')}")

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        os.close(self.master)


@pytest.fixture
def term(smollm2_path):
    t = Terminal([sys.executable, "-m", "gaacrt.cli.run", smollm2_path, "--temp", "0", "-n", "120", "-t", "2",
                  "--verbose"])
    yield t
    t.close()


def test_a_turn_ctrl_c_mid_reply_clear_and_exit(term):
    term.read_until(b">>> ")
    # A turn: the reply streams, then the figures and the prompt come back.
    term.send(b"What is the capital of France?\r")
    out = term.read_until(b">>> ")
    assert b"decode" in out and b"tok/s" in out and b"peak memory" in out
    # Ctrl-C in the middle of a long reply stops it and keeps the session usable.
    term.send(b"Write a very long story about a dragon who loves mathematics.\r")
    term.read_until(b"mathematics.")  # the terminal's echo of the line
    term.read_until(b" ")             # the reply has started
    time.sleep(0.3)
    term.send(b"\x03")
    out = term.read_until(b">>> ")
    assert b"[stopped]" in out
    m = re.search(rb"decode (\d+) tokens", out)
    assert m and 0 < int(m.group(1)) < 120, out
    # The conversation was kept: the next turn only evaluates the new tokens.
    term.send(b"Thanks.\r")
    out = term.read_until(b">>> ")
    kv = [int(x) for x in re.findall(rb"KV (\d+)/", out)]
    assert kv and kv[-1] > 60
    term.send(b"/clear\r")
    term.read_until(b"[conversation cleared]")
    term.read_until(b">>> ")
    term.send(b"/show info\r")
    term.read_until(b"hyperparameters")
    term.read_until(b">>> ")
    term.send(b'"""Line one\r')
    term.send(b'line two"""\r')
    out = term.read_until(b">>> ")
    assert b"decode" in out
    term.send(b"\x04")  # Ctrl-D
    assert term.proc.wait(30) == 0


def test_exit_command(term):
    term.read_until(b">>> ")
    term.send(b"/bye\r")
    assert term.proc.wait(30) == 0


def test_one_shot_and_piped_stdin(smollm2_path):
    r = subprocess.run([sys.executable, "-m", "gaacrt.cli.run", smollm2_path, "-p", "Say hi.", "--temp", "0", "-n", "8"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    r = subprocess.run([sys.executable, "-m", "gaacrt.cli.run", smollm2_path, "--temp", "0", "-n", "8"],
                       input="Say hi.\nSay bye.\n", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) >= 2, r.stderr


def test_bad_model_path_is_a_clear_error():
    r = subprocess.run([sys.executable, "-m", "gaacrt.cli.run", "/nonexistent/model.gguf", "-p", "x"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "/nonexistent/model.gguf" in r.stderr


def test_one_shot_with_a_lossy_cache_and_its_options(smollm2_path):
    # A prompt longer than E8's raw window, so the reply attends to compressed blocks.
    prompt = "Summarize: " + " ".join(f"item {i} is fine." for i in range(60))
    r = subprocess.run([sys.executable, "-m", "gaacrt.cli.run", smollm2_path, "-p", prompt, "--temp", "0", "-n", "8",
                        "--cache", "e8", "--e8-center", "--raw-sink", "16", "--verbose"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    r = subprocess.run([sys.executable, "-m", "gaacrt.cli.run", smollm2_path, "-p", "x", "--cache", "gaac",
                        "--raw-sink", "16"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "raw_sink" in r.stderr
    r = subprocess.run([sys.executable, "-m", "gaacrt.cli.run", smollm2_path, "-p", "x", "--cache", "e8",
                        "--e8-center", "blocks"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "invalid choice: 'blocks'" in r.stderr
