import * as fs from "node:fs"
import * as path from "node:path"
import { EventLogFile } from "@musekit/node"
import { beforeAll, describe, expect, it } from "vitest"
import { buggyRepo, ensureBuilt, fixScript, muse, museAsync, readLog, sandbox, writeScript } from "./support/cli.js"

beforeAll(() => ensureBuilt(), 240_000)

const parseLines = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l))

describe("muse run", () => {
  it("fixes a failing test headless; text output streams the answer to stdout and progress to stderr", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript())
    const r = muse(["run", "The unit test fails. Fix it.", "--script", script, "--allow", "run_shell:npm test"], {
      sb,
      cwd: repo
    })
    expect(r.stderr).toContain("● edit_file sum.js")
    expect(r.stderr).toContain("+export const sum = (a, b) => a + b")
    expect(r.stderr).toContain("● $ npm test")
    expect(r.stdout).toContain("Fixed: sum adds and npm test passes.")
    expect(r.code).toBe(0)
    expect(fs.readFileSync(path.join(repo, "sum.js"), "utf8")).toBe("export const sum = (a, b) => a + b\n")
  })

  it("--output-format json prints one object with the documented fields", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript())
    const r = muse(["run", "fix it", "--script", script, "--approval-mode", "auto", "--output-format", "json"], {
      sb,
      cwd: repo
    })
    expect(r.code).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(Object.keys(out).sort()).toEqual(
      ["durationMs", "events", "exitCode", "modelCalls", "output", "session", "status", "text", "usage"].sort()
    )
    expect(out).toMatchObject({
      status: "completed",
      exitCode: 0,
      text: "Fixed: sum adds and npm test passes.",
      modelCalls: 4,
      usage: { inputTokens: 5200, outputTokens: 160, tokens: 5360, cachedInputTokens: 0, costUsd: null }
    })
    expect(out.session).toMatch(/^\d{8}-\d{6}-[0-9a-f]{6}$/)
    expect(out.events).toBe(readLog(sb, out.session).length)
  })

  it("--output-format stream-json: a session line, every event as recorded, text deltas, a result line", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript())
    const r = muse(["run", "fix it", "--script", script, "--approval-mode", "auto", "--output-format", "stream-json"], {
      sb,
      cwd: repo
    })
    expect(r.code).toBe(0)
    const lines = parseLines(r.stdout)
    expect(lines[0]).toMatchObject({ kind: "session", model: "scripted/fix", root: fs.realpathSync(repo) })
    expect(lines.at(-1)).toMatchObject({ kind: "result", status: "completed", exitCode: 0, session: lines[0].session })
    for (const l of lines)
      expect(["session", "event", "text", "tool_output", "output", "notice", "result"]).toContain(l.kind)
    const events = lines.filter((l) => l.kind === "event").map((l) => l.event)
    // every recorded event, in order, exactly as in the log
    const log = readLog(sb, lines[0].session).map(({ crc: _crc, ...e }) => e)
    expect(events).toEqual(log)
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
    // text deltas come before the model.responded event that holds the whole text
    const firstDelta = lines.findIndex((l) => l.kind === "text")
    const firstResponse = lines.findIndex((l) => l.kind === "event" && l.event.type === "model.responded")
    expect(firstDelta).toBeGreaterThan(0)
    expect(firstDelta).toBeLessThan(firstResponse)
    expect(
      lines
        .filter((l) => l.kind === "text")
        .map((l) => l.delta)
        .join("")
    ).toContain("Reading sum.js.It subtracts; fixing it.")
    expect(
      lines.some((l) => l.kind === "tool_output" && typeof l.chunk === "string" && typeof l.callId === "string")
    ).toBe(true)
  })

  it("denies what needs a person in a headless run, with a reason that names the flag", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript())
    const r = muse(["run", "fix it", "--script", script, "--output-format", "stream-json"], { sb, cwd: repo })
    const lines = parseLines(r.stdout)
    const answered = lines.find((l) => l.kind === "event" && l.event.type === "approval.answered")
    expect(answered.event.data.allow).toBe(false)
    expect(answered.event.data.reason).toContain("no one can answer in a headless run")
    // the flag to use is named, with the rule the approvals propose (argv words, never a glob of the command text)
    expect(answered.event.data.reason).toContain('--allow "run_shell:npm test *"')
    expect(lines.some((l) => l.kind === "notice" && /denied run_shell/.test(l.text))).toBe(true)
    // the model saw the denial and finished anyway
    expect(r.code).toBe(0)
  })

  it("exit codes: 1 when the model fails, 2 for usage errors, 3 when the budget runs out", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const failing = writeScript(sb, "failing", { steps: [{ error: "the provider is down" }] })
    const r1 = muse(["run", "anything", "--script", failing], { sb, cwd: repo })
    expect(r1.code).toBe(1)
    expect(r1.stderr).toContain("the provider is down")

    const r2 = muse(["run", "x", "--output-format", "xml"], { sb, cwd: repo })
    expect(r2.code).toBe(2)
    const r2b = muse(["run", "x", "--model", "nope/model"], { sb, cwd: repo })
    expect(r2b.code).toBe(2)
    expect(r2b.stderr).toContain("Unknown model provider 'nope'")
    const r2c = muse(["run", "--script", failing], { sb, cwd: repo })
    expect(r2c.code).toBe(2)
    expect(r2c.stderr).toContain("muse run needs a task")
    const r2d = muse(["run", "x", "--model", "scripted/missing"], { sb, cwd: repo, env: { MUSE_SCRIPT_DIR: "" } })
    expect(r2d.code).toBe(2)
    expect(r2d.stderr).toContain("testing aid")

    const script = writeScript(sb, "fix", fixScript())
    const r3 = muse(["run", "fix it", "--script", script, "--max-turns", "2", "--output-format", "json"], {
      sb,
      cwd: repo
    })
    expect(r3.code).toBe(3)
    expect(JSON.parse(r3.stdout)).toMatchObject({
      status: "budget",
      exitCode: 3,
      reason: "turn budget of 2 model calls reached"
    })
  })

  it("exit code 130 on SIGINT; the turn is recorded as interrupted", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "slow", { steps: [{ text: "thinking…", delayMs: 60_000 }] })
    const p = museAsync(["run", "take your time", "--script", script, "--output-format", "stream-json"], {
      sb,
      cwd: repo
    })
    const session = (await p.waitForLine((l) => l.kind === "session")).session
    await p.waitForLine((l) => l.kind === "event" && l.event.type === "model.requested")
    p.child.kill("SIGINT")
    const { code } = await p.exited
    expect(code).toBe(130)
    const last = parseLines(p.stdout()).at(-1)
    expect(last).toMatchObject({ kind: "result", status: "interrupted", exitCode: 130 })
    expect(readLog(sb, session).map((e) => e.type)).toContain("turn.interrupted")
  })
})

describe("muse resume, replay, sessions, log", () => {
  it("resumes a run that was killed mid-request and finishes it; the session then replays exactly", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript({ slowSecondCall: 1500 }))
    const p = museAsync(
      ["run", "fix it", "--script", script, "--approval-mode", "auto", "--output-format", "stream-json"],
      {
        sb,
        cwd: repo
      }
    )
    const session = (await p.waitForLine((l) => l.kind === "session")).session
    // the second model request is in flight (the script waits 1.5 s before answering it)
    await p.waitForLine((l) => l.kind === "event" && l.event.type === "model.requested" && l.event.data.messages === 3)
    p.child.kill("SIGKILL")
    expect((await p.exited).signal).toBe("SIGKILL")
    const cut = readLog(sb, session)
    expect(cut.at(-1).type).toBe("model.requested")
    expect(cut.some((e) => e.type === "turn.completed")).toBe(false)
    expect(fs.readFileSync(path.join(repo, "sum.js"), "utf8")).toContain("a - b")

    const r = muse(["resume", session, "--script", script, "--output-format", "json"], { sb, cwd: repo })
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({
      session,
      status: "completed",
      text: "Fixed: sum adds and npm test passes."
    })
    const full = readLog(sb, session)
    expect(full.slice(0, cut.length)).toEqual(cut)
    expect(full.at(-1).type).toBe("turn.completed")
    expect(fs.readFileSync(path.join(repo, "sum.js"), "utf8")).toBe("export const sum = (a, b) => a + b\n")

    const v = muse(["replay", session, "--verify"], { sb, cwd: repo })
    expect(v.code).toBe(0)
    expect(v.stderr).toContain(`verified: ${full.length} of ${full.length} events replayed exactly`)
  })

  it("a task whose results force compactions: the scripted model keeps its place, each step runs once", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    // 12 files of ~40 KB: each read is cut to a tenth of the scripted model's 32k window, and
    // together they pass the compaction trigger several times over
    for (let i = 0; i < 12; i++)
      fs.writeFileSync(path.join(repo, `part${i}.txt`), `${`part ${i} line of text to read\n`.repeat(1300)}`)
    const steps = [
      // long replies: they cannot be masked like tool outputs, so older turns get folded into a summary
      ...Array.from({ length: 12 }, (_, i) => ({
        text: `Reading part ${i}. ${"Notes on what the earlier parts said. ".repeat(300)}`,
        tools: [{ name: "read_file", params: { path: `part${i}.txt` } }]
      })),
      { text: "Read all twelve parts." }
    ]
    const script = writeScript(sb, "long", { replies: [{ when: "read the parts", steps }] })
    const r = muse(
      ["run", "read the parts", "--script", script, "--approval-mode", "auto", "--output-format", "json"],
      {
        sb,
        cwd: repo
      }
    )
    expect(r.code).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out).toMatchObject({ status: "completed", text: "Read all twelve parts." })
    const events = readLog(sb, out.session)
    const compactions = events.filter((e) => e.type === "context.compacted")
    expect(compactions.some((e) => e.data.summarized > 0)).toBe(true)
    const reads = events.filter((e) => e.type === "tool.started").map((e) => e.data.params.path)
    expect(reads).toEqual(Array.from({ length: 12 }, (_, i) => `part${i}.txt`))
    const v = muse(["replay", out.session, "--verify"], { sb, cwd: repo })
    expect(v.code).toBe(0)
    expect(v.stderr).toContain(`verified: ${events.length} of ${events.length} events replayed exactly`)
  })

  it("replay prints a transcript; --verify names the first divergent seq of a tampered log", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript())
    const run = muse(["run", "fix it", "--script", script, "--approval-mode", "auto", "--output-format", "json"], {
      sb,
      cwd: repo
    })
    const session = JSON.parse(run.stdout).session as string

    const clean = muse(["replay", session, "--verify"], { sb, cwd: repo })
    expect(clean.code).toBe(0)
    expect(clean.stdout).toContain("› fix it")
    expect(clean.stdout).toContain("Reading sum.js.")
    expect(clean.stdout).toContain("● edit_file sum.js")
    expect(clean.stdout).toContain("+export const sum = (a, b) => a + b")
    expect(clean.stdout).toContain("Fixed: sum adds and npm test passes.")

    // change what the model answered at its second call, with a valid checksum
    const file = path.join(sb.state, "sessions", `${session}.jsonl`)
    const lines = fs
      .readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l !== "")
    const events = lines.map((l) => JSON.parse(l))
    const target = events.filter((e) => e.type === "model.responded")[1]
    const { crc: _crc, ...body } = target
    body.data.toolCalls[0].params.edits[0].new_text = "b + a"
    lines[target.seq] = EventLogFile.withChecksum(JSON.stringify(body))
    fs.writeFileSync(file, `${lines.join("\n")}\n`)
    const tampered = muse(["replay", session, "--verify"], { sb, cwd: repo })
    expect(tampered.code).toBe(1)
    const next = events.find((e) => e.seq > target.seq && e.agent === "main" && e.type === "tool.started")
    expect(tampered.stderr).toContain(`diverged at seq ${next.seq}`)
    expect(tampered.stderr).toMatch(/expected tool\.started .*a \+ b/)
    expect(tampered.stderr).toMatch(/got {6}tool\.started .*b \+ a/)
    // without --verify the transcript still prints
    expect(muse(["replay", session], { sb, cwd: repo }).code).toBe(0)
  })

  it("sessions lists them; log filters by agent and type", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript())
    const run = muse(["run", "fix it", "--script", script, "--approval-mode", "auto", "--output-format", "json"], {
      sb,
      cwd: repo
    })
    const session = JSON.parse(run.stdout).session as string
    const list = muse(["sessions"], { sb, cwd: repo })
    expect(list.code).toBe(0)
    expect(list.stdout.split("\n")[0]).toMatch(/^ID\s+STARTED\s+LAST EVENT\s+EVENTS\s+SIZE\s+TITLE/)
    expect(list.stdout).toContain(session)
    expect(list.stdout).toContain("fix it")
    const json = parseLines(muse(["sessions", "--json"], { sb, cwd: repo }).stdout)
    expect(json[0]).toMatchObject({ id: session, title: "fix it", events: readLog(sb, session).length })

    const tools = muse(["log", session, "--type", "tool.started"], { sb, cwd: repo })
    expect(tools.code).toBe(0)
    const rows = tools.stdout.trim().split("\n")
    expect(rows).toHaveLength(3)
    expect(rows[0]).toMatch(/main\s+tool\.started\s+read_file sum\.js/)
    expect(rows[2]).toContain("$ npm test")
    const raw = parseLines(muse(["log", "--type", "model.*", "--json"], { sb, cwd: repo }).stdout)
    expect(raw.map((e) => e.type)).toEqual(Array(4).fill(["model.requested", "model.responded"]).flat())
    expect(muse(["log", session, "--agent", "nobody"], { sb, cwd: repo }).stdout).toBe("")
    const missing = muse(["log", "no-such-session"], { sb, cwd: repo })
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain('no such session: "no-such-session"')
    // a name that is no session id (a path) is no session either: usage error, nothing read or written
    for (const command of ["log", "replay", "resume"]) {
      const bad = muse([command, "../../etc/passwd"], { sb, cwd: repo })
      expect(bad.code, `${command}: ${bad.stderr}`).toBe(2)
      expect(bad.stderr).toContain('no such session: "../../etc/passwd"')
    }
  })

  it("the example session ships with the CLI and replays exactly, with no API key", () => {
    const sb = sandbox()
    const r = muse(["replay", "--example", "--verify"], { sb })
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("› The unit test fails. Fix it.")
    expect(r.stdout).toContain("explorer-1")
    expect(r.stdout).toContain("+export const sum = (a, b) => a + b")
    expect(r.stderr).toMatch(/verified: (\d+) of \1 events replayed exactly/)
  })
})

describe("configuration and first run", () => {
  it("a corrupt config file is an error naming the file and the field", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript())
    fs.mkdirSync(path.join(repo, ".muse"))
    const file = path.join(repo, ".muse", "config.json")
    fs.writeFileSync(file, JSON.stringify({ approvalMode: "sometimes", modle: "x", budget: { turns: -1 } }))
    // an untrusted folder's file is not read at all; trusted, its mistakes are errors
    const r = muse(["run", "fix it", "--script", script, "--trust"], { sb, cwd: repo })
    expect(r.code).toBe(2)
    expect(r.stderr).toContain(`${fs.realpathSync(file)} is not a valid muse config`)
    expect(r.stderr).toMatch(
      /field "approvalMode": Expected "read-only" \| "ask" \| "auto-edit" \| "auto", actual "sometimes"/
    )
    expect(r.stderr).toMatch(/field "modle": unknown field/)
    expect(r.stderr).toMatch(/field "budget\.turns": Expected a positive number, actual -1/)

    fs.writeFileSync(file, "{ model: ")
    const bad = muse(["run", "fix it", "--script", script, "--trust"], { sb, cwd: repo })
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain(`${fs.realpathSync(file)} is not valid JSON`)

    // a valid user config is used (its approval mode reaches the session)
    fs.rmSync(file)
    fs.mkdirSync(path.join(sb.home, ".config", "muse"), { recursive: true })
    fs.writeFileSync(
      path.join(sb.home, ".config", "muse", "config.json"),
      JSON.stringify({ approvalMode: "auto", crew: false })
    )
    const ok = muse(["run", "fix it", "--script", script, "--output-format", "json"], { sb, cwd: repo })
    expect(ok.code).toBe(0)
    const first = readLog(sb, JSON.parse(ok.stdout).session)[0]
    expect(first.data.config).toMatchObject({ approvalMode: "auto", crew: false })
  })

  it("with no model and no API key, one screen says what to do", () => {
    const sb = sandbox()
    const r = muse(["run", "hello"], { sb })
    expect(r.code).toBe(2)
    for (const needle of [
      "ANTHROPIC_API_KEY",
      "OPENAI_API_KEY",
      "GEMINI_API_KEY",
      "--model ollama/qwen2.5-coder",
      "muse replay --example"
    ]) {
      expect(r.stderr).toContain(needle)
    }
    expect(Math.max(...r.stderr.split("\n").map((l) => l.length))).toBeLessThanOrEqual(80)
    const keyless = muse(["run", "hello", "--model", "anthropic/claude-sonnet-4-5"], { sb })
    expect(keyless.code).toBe(2)
    expect(keyless.stderr).toContain("ANTHROPIC_API_KEY is not set")
    expect(keyless.stderr).toContain("muse replay --example")
  })

  it("--version prints the package version; --help lists the commands", () => {
    const sb = sandbox()
    const version = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "package.json"), "utf8")).version
    const r = muse(["--version"], { sb })
    expect(r.code).toBe(0)
    expect(r.stdout.trim()).toBe(version)
    const help = muse(["--help"], { sb })
    expect(help.code).toBe(0)
    for (const c of ["run", "sessions", "resume", "replay", "log"]) expect(help.stdout).toContain(c)
    expect(help.stdout).not.toContain("--script")
    const noTty = muse([], { sb })
    expect(noTty.code).toBe(2)
    expect(noTty.stderr).toContain("needs a terminal")
  })

  it("--help into a pipe has no colour codes, with neither NO_COLOR nor FORCE_COLOR set", () => {
    const sb = sandbox()
    for (const args of [["--help"], ["run", "--help"]]) {
      const help = muse(args, { sb, env: { NO_COLOR: undefined, FORCE_COLOR: undefined } })
      expect(help.code, help.stderr).toBe(0)
      expect(help.stdout).toContain("USAGE")
      expect(help.stdout).not.toContain("\u001b")
      expect(help.stderr).not.toContain("\u001b")
    }
  })
})

describe("large inputs", () => {
  it("a 21 MB task on stdin goes to the blob store once: the log stays small and replays", { timeout: 240_000 }, () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "large", {
      replies: [{ when: "summarize this dump", steps: [{ text: "Read it." }] }]
    })
    const line = "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 -=-=-=-=-=-=-=-\n"
    const task = `summarize this dump\n${line.repeat(Math.ceil((21 * 1024 * 1024) / line.length))}`
    const r = muse(["run", "-", "--script", script, "--no-crew", "--output-format", "json"], {
      sb,
      cwd: repo,
      input: task,
      timeoutMs: 180_000
    })
    expect(r.code, r.stderr).toBe(0)
    const session = JSON.parse(r.stdout).session as string
    const logFile = path.join(sb.state, "sessions", `${session}.jsonl`)
    // the log holds a reference and a preview, not the text (before: 105 MB, user.message alone 42 MB)
    expect(fs.statSync(logFile).size).toBeLessThan(256 * 1024)
    const input = readLog(sb, session).find((e) => e.type === "user.input").data
    expect(input.bytes).toBe(Buffer.byteLength(task.trimEnd()))
    // everything under the state directory: the task once, and little else
    const total = (dir: string): number =>
      fs
        .readdirSync(dir, { withFileTypes: true })
        .reduce(
          (n, e) => n + (e.isDirectory() ? total(path.join(dir, e.name)) : fs.statSync(path.join(dir, e.name)).size),
          0
        )
    expect(total(sb.state)).toBeLessThan(Buffer.byteLength(task) + 1024 * 1024)
    const v = muse(["replay", session, "--verify"], { sb, cwd: repo, timeoutMs: 180_000 })
    expect(v.code, v.stderr).toBe(0)
  })
})
