"""A minimal command-line agent, run inside the task's container: it asks the model for one bash command at a time,
runs it, feeds back the output, and stops when a command prints the submit line or the model cannot be asked.

    python3 -I shell_agent.py --instruction FILE [--command-timeout SECONDS] [--max-format-errors N]

The model is the OpenAI-compatible endpoint at OPENAI_BASE_URL (in the benchmark: the relay bridge on the
container's loopback; the relay on the host chooses the model and holds the key and the budget). Standard library
only, Python >= 3.6, so it runs in any task image.

Prompt and reply format: a system prompt (below) and the instruction file as the first user message. Each request
offers one `bash` tool (`{"command": string}`); the command is the reply's first `bash` tool call, or, for a model
without tool calls, the first fenced ```bash block of its text. The observation goes back as the tool call's
`tool` message (or a user message) in the form `<exit_code>N</exit_code>` then `<output>...</output>` (long output
cut to its head and tail). A command whose output's first line is COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT and that
exits 0 ends the run.

Exit codes: 0 submitted; 3 the relay said the budget is spent; 4 the model could not be asked (the endpoint's
error); 5 too many replies in a row without a command.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
EXIT_SUBMITTED, EXIT_BUDGET, EXIT_MODEL_ERROR, EXIT_FORMAT_ERRORS = 0, 3, 4, 5
OUTPUT_KEEP = 1 << 20  # of a command's output, the last megabyte is read
SHOWN_HALF = 6000  # characters of head and of tail shown to the model
SYSTEM_PROMPT = (
    "You are a software engineer working on a code repository inside a sandboxed container without network "
    "access. You act only through the `bash` tool: every reply must call it with one shell command (commands may be "
    "joined with && or ||). If you cannot call tools, put the command in a fenced ```bash block instead. Each command "
    "runs in a fresh shell in the repository's root, so `cd` and exported variables do not carry over. Edit files "
    "with shell tools (sed, cat with a here-document, python). Explain your reasoning briefly before each command."
    "\n\nWhen your work is complete, run `echo " + SUBMIT + "` alone; after that you cannot act again."
)
FORMAT_ERROR = ("Your reply held no command. Call the `bash` tool with exactly one command (or write one fenced "
                "```bash block), or run `echo " + SUBMIT + "` alone when you are done.")
BASH_TOOL = {"type": "function", "function": {
    "name": "bash", "description": "Run one shell command in the repository's root and see its output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
FENCED = re.compile(r"```(?:bash|sh)\s*\n(.*?)```", re.DOTALL)


def ask(messages):
    """(status, answer) of one chat-completion request."""
    url = os.environ.get("OPENAI_BASE_URL", "").rstrip("/") + "/chat/completions"
    body = json.dumps({"model": os.environ.get("ASYNCODEBENCH_MODEL", "relay"), "messages": messages,
                       "tools": [BASH_TOOL]}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "none")})
    try:
        with urllib.request.urlopen(request, timeout=3600) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, {}
    except (OSError, ValueError) as exc:
        return 0, {"error": {"message": str(exc)}}


def command_of(message):
    """(command, tool call id) of a reply; (None, id) when it has none."""
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        if function.get("name") == "bash":
            try:
                command = json.loads(function.get("arguments") or "{}").get("command")
            except (ValueError, AttributeError):
                command = None
            return (command if isinstance(command, str) else None), call.get("id")
    found = FENCED.search(message.get("content") or "")
    return (found.group(1).strip() if found else None), None


def run(command, timeout):
    """(exit code, output) of `command`: its whole process group is killed after `timeout` seconds."""
    shell = shutil.which("bash") or "sh"
    process = subprocess.Popen([shell, "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    chunks, kept, stream = [], [0], process.stdout
    assert stream is not None  # a pipe was asked for

    def drain():
        for chunk in iter(lambda: stream.read(65536), b""):
            chunks.append(chunk)
            kept[0] += len(chunk)
            while kept[0] - len(chunks[0]) >= OUTPUT_KEEP:
                kept[0] -= len(chunks.pop(0))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        code = process.wait(timeout)
        note = ""
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        code = process.wait()
        note = "\n(the command was stopped after its time limit of %d s)" % timeout
    reader.join(5)
    return code, b"".join(chunks).decode("utf-8", "replace") + note


def observation(code, output):
    """What the model is told of a command: its exit code and output, long output cut to its head and tail."""
    if len(output) > 2 * SHOWN_HALF:
        shown = ("<output_head>\n%s</output_head>\n<omitted>%d characters</omitted>\n<output_tail>\n%s</output_tail>"
                 % (output[:SHOWN_HALF], len(output) - 2 * SHOWN_HALF, output[-SHOWN_HALF:]))
    else:
        shown = "<output>\n%s</output>" % output
    return "<exit_code>%s</exit_code>\n%s" % (code, shown)


def main(argv):
    """Ask, run, feed back until the submit line or an error; the exit code says which (module docstring)."""
    parser = argparse.ArgumentParser(description="A minimal bash agent (see the module docstring).")
    parser.add_argument("--instruction", required=True, help="file holding the task as the agent is told it")
    parser.add_argument("--command-timeout", type=int, default=300)
    parser.add_argument("--max-format-errors", type=int, default=3)
    args = parser.parse_args(argv)
    with open(args.instruction, encoding="utf-8") as handle:
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": handle.read()}]
    format_errors = 0
    while True:
        status, answer = ask(messages)
        if status != 200:
            error = answer.get("error") if isinstance(answer.get("error"), dict) else {}
            sys.stderr.write("shell agent: the model answered %s: %s\n" % (status, error.get("message", answer)))
            return EXIT_BUDGET if error.get("code") == "budget_exhausted" else EXIT_MODEL_ERROR
        try:
            message = answer["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            sys.stderr.write("shell agent: an answer without a message: %s\n" % str(answer)[:1000])
            return EXIT_MODEL_ERROR
        command, call_id = command_of(message)
        reply = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            reply["tool_calls"] = message["tool_calls"]
        messages.append(reply)
        if command is None:
            format_errors += 1
            if format_errors >= args.max_format_errors:
                sys.stderr.write("shell agent: %d replies in a row without a command\n" % format_errors)
                return EXIT_FORMAT_ERRORS
            calls = message.get("tool_calls") or []
            messages += [{"role": "tool", "tool_call_id": c.get("id"), "content": FORMAT_ERROR} for c in calls]
            if not calls:
                messages.append({"role": "user", "content": FORMAT_ERROR})
            continue
        format_errors = 0
        code, output = run(command, args.command_timeout)
        lines = output.lstrip().splitlines()
        if code == 0 and lines and lines[0].strip() == SUBMIT:
            return EXIT_SUBMITTED
        # Every tool call must be answered; only the first one runs.
        for call in message.get("tool_calls") or []:
            text = observation(code, output) if call.get("id") == call_id else "Only one command runs per reply."
            messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": text})
        if call_id is None:
            messages.append({"role": "user", "content": observation(code, output)})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
