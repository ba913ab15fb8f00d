/**
 * Every command that prints recorded text prints it inert: the headless text output (the model's
 * answer on stdout, progress on stderr), stream-json and json, `muse log`, `muse replay`,
 * `muse sessions`. A hostile model answers with escape sequences, bidi overrides and a command
 * that hides its second line; none of it reaches the terminal raw.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import * as Trust from "../../src/internal/trust.js"
import { buggyRepo, ensureBuilt, muse, sandbox, writeScript } from "../support/cli.js"

beforeAll(() => ensureBuilt(), 240_000)

const EVIL = "all good\x1b[2K\r\x1b]0;title\x07\u202eevil\x9b2J"
/** Raw characters a terminal acts on (the sandbox sets NO_COLOR, so muse writes no escape sequence itself). */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/

describe("printed output is inert", () => {
  it("muse run (text, stream-json, json), muse log, muse replay and muse sessions", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "evil", {
      steps: [
        { text: `Here:${EVIL}\n`, tools: [{ name: "run_shell", params: { command: `npm test\n${EVIL}` } }] },
        { text: `Finished ${EVIL}` }
      ]
    })
    const task = `check ${EVIL}`
    const text = muse(["run", task, "--script", script], { sb, cwd: repo })
    expect(text.code).toBe(0)
    expect(text.stdout).not.toMatch(RAW)
    expect(text.stderr).not.toMatch(RAW)
    expect(text.stdout).toContain("Here:all good\\x1b[2K\\r\\x1b]0;title\\x07\\u202eevil\\x9b2J")
    // the denied command is named whole, both lines
    expect(text.stderr).toContain("npm test\\nall good\\x1b[2K")

    const stream = muse(["run", task, "--script", script, "--output-format", "stream-json"], { sb, cwd: repo })
    expect(stream.stdout).not.toMatch(RAW)
    const lines = stream.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
    const responded = lines.find((l) => l.kind === "event" && l.event.type === "model.responded")
    expect(responded.event.data.text).toBe(`Here:${EVIL}\n`)

    const json = muse(["run", task, "--script", script, "--output-format", "json"], { sb, cwd: repo })
    expect(json.stdout).not.toMatch(RAW)
    const result = JSON.parse(json.stdout)
    expect(result.text).toBe(`Finished ${EVIL}`)

    const session = result.session as string
    for (const [args, shown] of [
      [["log", session], "\\x1b[2K"],
      [["log", session, "--json"], "\\u202eevil"],
      [["replay", session], "\\u202eevil"],
      [["sessions"], "check all good\\x1b[2K"]
    ] as const) {
      const r = muse(args, { sb, cwd: repo })
      expect(r.code, args.join(" ")).toBe(0)
      expect(r.stdout, args.join(" ")).not.toMatch(RAW)
      expect(r.stdout, args.join(" ")).toContain(shown)
    }
    const sessions = muse(["sessions", "--json"], { sb, cwd: repo })
    expect(sessions.stdout).not.toMatch(RAW)
    expect(JSON.parse(sessions.stdout.split("\n")[0]!).title).toBe(task)
    const log = muse(["log", session, "--json"], { sb, cwd: repo })
    const input = log.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .find((e) => e.type === "user.input")
    expect(input.data.text).toBe(task)
  })
})

describe("'yes, always' in a trusted folder keeps it trusted, and only for the user's own rule", () => {
  const setup = () => {
    const sb = sandbox()
    const repo = fs.realpathSync(buggyRepo(sb.root))
    fs.mkdirSync(path.join(repo, ".muse"))
    const file = path.join(repo, ".muse", "permissions.json")
    const start = [{ tool: "read_file", action: "allow", scope: "project" }]
    fs.writeFileSync(file, JSON.stringify({ rules: start }))
    return { sb, repo, file, start }
  }
  const status = (sb: ReturnType<typeof sandbox>, repo: string) => Trust.status(Trust.scan(repo), sb.env)._tag
  const saved = { tool: "run_shell", pattern: "npm test", action: "allow", scope: "project" }

  it("the user's saved rule is taken into the record", () => {
    const { sb, repo, file, start } = setup()
    const baseline = Trust.fingerprint(Trust.scan(repo))
    fs.mkdirSync(path.join(sb.home, ".config", "muse"), { recursive: true })
    fs.writeFileSync(
      Trust.trustFile(sb.env),
      JSON.stringify({ folders: { [repo]: { trustedAt: "2025-01-01T00:00:00.000Z", files: baseline } } })
    )
    expect(status(sb, repo)).toBe("trusted")
    fs.writeFileSync(file, JSON.stringify({ rules: [...start, saved] }))
    expect(status(sb, repo)).toBe("changed")
    expect(Trust.acceptSavedRules({ root: repo, baseline, rulesAtStart: start, saved: [saved], env: sb.env })).toBe(
      true
    )
    expect(status(sb, repo)).toBe("trusted")
  })

  it("a rule the user did not save, or another changed file, keeps the folder asking", () => {
    const { sb, repo, file, start } = setup()
    const baseline = Trust.fingerprint(Trust.scan(repo))
    fs.writeFileSync(file, JSON.stringify({ rules: [...start, saved, { tool: "*", action: "allow" }] }))
    expect(Trust.acceptSavedRules({ root: repo, baseline, rulesAtStart: start, saved: [saved], env: sb.env })).toBe(
      false
    )
    fs.writeFileSync(file, JSON.stringify({ rules: [...start, saved] }))
    fs.writeFileSync(path.join(repo, ".muse", "config.json"), JSON.stringify({ approvalMode: "auto" }))
    expect(Trust.acceptSavedRules({ root: repo, baseline, rulesAtStart: start, saved: [saved], env: sb.env })).toBe(
      false
    )
    expect(status(sb, repo)).toBe("untrusted")
  })

  it("in a folder that had nothing to trust, a file holding only the user's rule becomes trusted", () => {
    const sb = sandbox()
    const repo = fs.realpathSync(buggyRepo(sb.root))
    expect(status(sb, repo)).toBe("nothing")
    fs.mkdirSync(path.join(repo, ".muse"))
    fs.writeFileSync(path.join(repo, ".muse", "permissions.json"), JSON.stringify({ rules: [saved] }))
    expect(Trust.acceptSavedRules({ root: repo, baseline: {}, rulesAtStart: [], saved: [saved], env: sb.env })).toBe(
      true
    )
    expect(status(sb, repo)).toBe("trusted")
  })
})
