"""gaac-run — chat with a GGUF model in the terminal.

    gaac-run [model.gguf] [options]          interactive chat (no path: the default model)
    gaac-run model.gguf -p "Why is the sky blue?"     one shot
    echo "Why is the sky blue?" | gaac-run model.gguf  piped stdin: one shot per line
    gaac-run --info [model.gguf]             the model's summary

In the chat: Ctrl-C stops the current reply (the conversation keeps it), Ctrl-D or /bye or
/exit quits, /clear starts over, /set system TEXT, /set temperature X, /show info, and a turn
that starts with \"\"\" continues over several lines until a line ending with \"\"\".
The KV cache is reused across turns: only the new part of the conversation is evaluated.
"""
from __future__ import annotations

import argparse
import signal
import sys

from .. import models
from .._core import GaacrtError, GGUFError
from ..model import Model, SamplingParams, Session
from . import add_lossy_cache_args
from .inspect import describe

HELP = """commands:
  /bye, /exit          quit (Ctrl-D too)
  /clear               forget the conversation
  /set system TEXT     set the system prompt (and clear)
  /set temperature X   sampling temperature (0 = greedy)
  /show info           the model's summary
  \"\"\"                 start/end a multi-line message
  Ctrl-C               stop the current reply"""


class Chat:
    def __init__(self, model: Model, args: argparse.Namespace):
        self.model = model
        self.args = args
        self.system = args.system
        self.sampling = SamplingParams(temperature=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                                       repeat_penalty=args.repeat_penalty, seed=args.seed)
        self.session: Session = model.session(n_ctx=args.ctx_size, cache=args.cache, calibration=args.calibration,
                                              check_lossless=args.check_lossless, e8_center=args.e8_center,
                                              raw_sink=args.raw_sink, raw_window=args.raw_window)
        self.messages: list[dict] = []

    def clear(self) -> None:
        self.messages = []
        self.session.reset()

    def _prompt_tokens(self) -> list[int]:
        """Tokens to evaluate for the next reply: the formatted conversation minus the prefix the
        session already holds (the session is truncated to that common prefix)."""
        msgs = ([{"role": "system", "content": self.system}] if self.system else []) + self.messages
        text = self.model.apply_chat_template(msgs, add_generation_prompt=True, jinja=False)
        toks = self.model.tokenize(text, add_special=True, parse_special=True)
        hist = self.session.history
        k = 0
        while k < len(hist) and k < len(toks) and hist[k] == toks[k]:
            k += 1
        if k == len(toks):  # keep at least one token to evaluate, so logits are fresh
            k -= 1
        if k < len(hist):
            self.session.truncate(k)
        return toks[k:]

    def reply(self, user_text: str) -> None:
        self.messages.append({"role": "user", "content": user_text})
        toks = self._prompt_tokens()
        if self.session.n_past + len(toks) >= self.session.n_ctx:
            print(f"\n[context full: {self.session.n_past + len(toks)} tokens >= {self.session.n_ctx}; "
                  f"use /clear or a larger -c]", file=sys.stderr)
            self.messages.pop()
            return
        parts: list[str] = []
        interrupted = []

        def on_sigint(*_):
            interrupted.append(True)
            self.session.cancel()

        previous = signal.signal(signal.SIGINT, on_sigint)
        last = None
        try:
            for chunk in self.session.generate_tokens(toks, self.args.n_predict, (), self.sampling):
                if interrupted and not self.session._s.cancelled:
                    self.session.cancel()  # Ctrl-C came before generation reset the flag
                if chunk.text:
                    sys.stdout.write(chunk.text)
                    sys.stdout.flush()
                    parts.append(chunk.text)
                last = chunk
        finally:
            signal.signal(signal.SIGINT, previous)
        sys.stdout.write("\n")
        if last is not None and last.finish_reason == "cancelled":
            print("[stopped]", file=sys.stderr)
        if last is not None and last.finish_reason == "context_full":
            print("[context full]", file=sys.stderr)
        self.messages.append({"role": "assistant", "content": "".join(parts)})
        if self.args.verbose and last is not None:
            print(f"[prompt {last.prompt_tokens} tokens, {last.prompt_tps:.1f} tok/s | decode {last.decode_tokens} "
                  f"tokens, {last.decode_tps:.1f} tok/s | peak memory {last.peak_memory / 2**20:.0f} MiB | "
                  f"KV {self.session.n_past}/{self.session.n_ctx} tokens, {self.args.cache}]", file=sys.stderr)
            st = self.session.kv_stats()
            if "k" in st:  # a compressed format: what it is doing
                kv = " | ".join(
                    f"{n.upper()} codec {st[n]['codec_ratio']:.3f}, groups 3-bit {100 * st[n]['share_3bit']:.1f}% "
                    f"4-bit {100 * st[n]['share_4bit']:.1f}% raw {100 * st[n]['share_raw_groups']:.2f}%, "
                    f"raw tiles {100 * st[n]['raw_tile_share']:.1f}%" for n in ("k", "v"))
                print(f"[KV resident {st['resident_bytes'] / 2**20:.2f} MiB, ratio {st['resident_ratio']:.3f} | {kv}]",
                      file=sys.stderr)

    def command(self, line: str) -> bool:
        """Handles a /command; returns False to quit."""
        parts = line.split(maxsplit=2)
        cmd = parts[0]
        if cmd in ("/bye", "/exit", "/quit"):
            return False
        if cmd == "/clear":
            self.clear()
            print("[conversation cleared]")
        elif cmd == "/set" and len(parts) >= 2 and parts[1] == "system":
            self.system = parts[2] if len(parts) == 3 else ""
            self.clear()
            print("[system prompt set; conversation cleared]")
        elif cmd == "/set" and len(parts) == 3 and parts[1] in ("temperature", "temp"):
            try:
                self.sampling.temperature = float(parts[2])
                print(f"[temperature {self.sampling.temperature}]")
            except ValueError:
                print(f"[not a number: {parts[2]}]")
        elif cmd == "/show" and len(parts) >= 2 and parts[1] == "info":
            print(describe(self.model.path))
            print(f"backend: {self.model.backend}, cache: {self.args.cache}, context: {self.session.n_past}/"
                  f"{self.session.n_ctx} tokens")
        else:
            print(HELP)
        return True


def read_turn() -> str | None:
    """One user turn from the terminal; None on EOF (Ctrl-D). Ctrl-C abandons the line."""
    try:
        line = input(">>> ")
    except EOFError:
        return None
    except KeyboardInterrupt:
        print()
        return ""
    if not line.startswith('"""'):
        return line
    lines = [line[3:]]
    if line.endswith('"""') and len(line) >= 6:
        return line[3:-3]
    while True:
        try:
            more = input("... ")
        except EOFError:
            break
        except KeyboardInterrupt:
            print()
            return ""
        if more.endswith('"""'):
            lines.append(more[:-3])
            break
        lines.append(more)
    return "\n".join(lines).strip("\n")


def interactive(chat: Chat) -> int:
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:
        pass
    print(f"gaacrt {chat.model.description} on {chat.model.backend} — /? for help, Ctrl-D to quit", file=sys.stderr)
    while True:
        line = read_turn()
        if line is None:
            print()
            return 0
        if not line.strip():
            continue
        if line.startswith("/"):
            if not chat.command(line.strip()):
                return 0
            continue
        chat.reply(line)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gaac-run", description="Chat with a GGUF model in the terminal.")
    ap.add_argument("model", nargs="?", help="GGUF file (default: SmolLM2-135M-Instruct, fetched on first use)")
    ap.add_argument("--info", action="store_true", help="print the model's summary and exit")
    ap.add_argument("-p", "--prompt", help="one-shot prompt (otherwise interactive, or one turn per stdin line)")
    ap.add_argument("-sys", "--system", default="", help="system prompt")
    ap.add_argument("-c", "--ctx-size", type=int, default=4096, help="context length (default 4096)")
    ap.add_argument("-n", "--n-predict", type=int, default=512, help="max tokens per reply (default 512)")
    ap.add_argument("--temp", type=float, default=0.8, help="temperature (default 0.8; 0 = greedy)")
    ap.add_argument("--top-k", type=int, default=40)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--min-p", type=float, default=0.05)
    ap.add_argument("--repeat-penalty", type=float, default=1.0)
    ap.add_argument("-s", "--seed", type=int, default=None, help="RNG seed (default random)")
    ap.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default all cores)")
    ap.add_argument("--cache", default="bf16",
                    help="KV cache format: bf16 (default), gaac, fp8_e4m3+gaac, fp8_e5m2+gaac, e8, q8, kivi2")
    add_lossy_cache_args(ap)
    ap.add_argument("--backend", default="auto", help="auto (default), cpu, cuda")
    ap.add_argument("--calibration", default=None, help="GAAC sidecar (default: model.gaac beside the model, "
                                                          "else calibrate online)")
    ap.add_argument("--check-lossless", action="store_true",
                    help="run a BF16 cache beside and stop at the first logit that differs by one bit")
    ap.add_argument("--act-bits", type=int, choices=(8, 16), default=16,
                    help="CPU matmul activation precision: 16 (default, closest to exact math) or 8 (llama.cpp's)")
    ap.add_argument("--verbose", action="store_true", help="print tok/s and peak memory after each reply")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        path = args.model or models.default()
        if args.info:
            print(describe(path))
            return 0
        model = Model(path, backend=args.backend, n_threads=args.threads, act_bits=args.act_bits)
        chat = Chat(model, args)
        if args.prompt is not None:
            chat.reply(args.prompt)
            return 0
        if not sys.stdin.isatty():
            for line in sys.stdin:
                if line.strip():
                    chat.reply(line.rstrip("\n"))
            return 0
        return interactive(chat)
    except (GGUFError, GaacrtError, models.ModelFetchError, OSError, ValueError) as e:
        print(f"gaac-run: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
