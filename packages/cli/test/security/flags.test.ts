/**
 * Strict flags: a misspelled flag is an error that stops everything (exit 2, "did you mean"),
 * never text folded into the task; `--` ends the flags; an unknown command is an error even with
 * --help.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Either } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import * as Argv from "../../src/internal/argv.js"
import { buggyRepo, ensureBuilt, muse, sandbox, writeScript } from "../support/cli.js"

beforeAll(() => ensureBuilt(), 240_000)

const fails = (argv: ReadonlyArray<string>) => {
  const r = Argv.parse(argv)
  if (Either.isRight(r)) throw new Error(`expected ${JSON.stringify(argv)} to be refused`)
  return r.left.message
}
const parses = (argv: ReadonlyArray<string>) => {
  const r = Argv.parse(argv)
  if (Either.isLeft(r)) throw new Error(`expected ${JSON.stringify(argv)} to parse: ${r.left.message}`)
  return r.right
}

describe("Argv.parse refuses what it does not know", () => {
  it.each([
    [["run", "fix it", "--dney", "run_shell:rm*"], "unknown flag --dney for muse run; did you mean --deny?"],
    [["run", "--dney", "run_shell:rm*", "fix it"], "did you mean --deny?"],
    [["run", "fix it", "--approval-mod", "auto"], "did you mean --approval-mode?"],
    [["run", "fix it", "--alow", "read_file"], "did you mean --allow?"],
    [["run", "fix it", "--max-turn", "3"], "did you mean --max-turns?"],
    [["run", "fix it", "--no-crews"], "did you mean --no-crew?"],
    [["run", "fix it", "--ouput-format", "json"], "did you mean --output-format?"],
    [["run", "fix it", "--bogus-flag"], "unknown flag --bogus-flag for muse run"],
    [["run", "fix it", "--verify"], "it is a flag of muse replay"],
    [["run", "fix it", "-x"], "unknown option -x for muse run"],
    [["run", "fix it", "--model"], "--model needs a value"],
    [["run", "fix it", "--no-crew=yes"], "--no-crew takes no value"],
    [["run", "fix it", "--model", "a/b", "--model", "c/d"], "--model is given more than once"],
    [["--dney", "x"], "unknown flag --dney for muse; did you mean --deny?"],
    [["sessions", "--jsn"], "did you mean --json?"],
    [["log", "--agnet", "main"], "did you mean --agent?"],
    [["replay", "--verfy"], "did you mean --verify?"],
    [["resume", "--output-format", "json", "--trsut"], "did you mean --trust?"],
    [["bogus", "--help"], 'unknown command "bogus"'],
    [["rnu", "fix"], 'unknown command "rnu"; did you mean muse run?'],
    [["fix", "the", "bug"], 'unknown command "fix"'],
    [["sessions", "extra"], 'muse sessions takes no arguments (got "extra")'],
    [["replay", "a", "b"], "takes at most one session id"],
    [["--", "run", "x"], 'unknown command "run"'],
    [["run", "x", "--wizard"], "unknown flag --wizard"],
    [["run", "x", "--completions", "bash"], "unknown flag --completions"],
    [["run", "x", "--log-level", "debug"], "unknown flag --log-level"]
  ])("%j", (argv, message) => {
    expect(fails(argv)).toContain(message)
  })
})

describe("Argv.parse reads what it knows", () => {
  it("flags anywhere; positionals taken out; -- ends the flags", () => {
    expect(parses(["run", "fix", "--approval-mode", "ask", "it", "--allow=read_file"])).toMatchObject({
      command: "run",
      flags: ["--approval-mode", "ask", "--allow", "read_file"],
      positionals: ["fix", "it"]
    })
    expect(parses(["run", "--", "--text", "--dney"])).toMatchObject({
      command: "run",
      flags: [],
      positionals: ["--text", "--dney"]
    })
    expect(parses(["run", "-m", "a/b", "-", "--no-crew"])).toMatchObject({
      flags: ["--model", "a/b", "--no-crew"],
      positionals: ["-"]
    })
  })

  it("flags before the command are the command's; the hidden --script is taken out", () => {
    expect(parses(["--approval-mode", "auto", "run", "x", "--script", "s.json"])).toMatchObject({
      command: "run",
      flags: ["--approval-mode", "auto"],
      positionals: ["x"],
      script: "s.json"
    })
  })

  it("a value may start with a dash; --help and --version are seen", () => {
    expect(parses(["run", "x", "--deny", "-rf"]).flags).toEqual(["--deny", "-rf"])
    expect(parses(["run", "--help"]).help).toBe(true)
    expect(parses(["--version"]).version).toBe(true)
    expect(parses(["log", "20250101-000000-abcdef", "--type", "tool.*"]).positionals).toEqual([
      "20250101-000000-abcdef"
    ])
  })

  it("closest finds typos, not unrelated words", () => {
    expect(Argv.distance("dney", "deny")).toBe(1)
    expect(Argv.closest("approval-mod", ["approval-mode", "allow"])).toBe("approval-mode")
    expect(Argv.closest("bogus-flag", ["deny", "allow", "model"])).toBeUndefined()
  })
})

describe("muse with misspelled flags", () => {
  it("exits 2 before anything runs, naming the closest flag", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "rm", {
      steps: [{ tools: [{ name: "run_shell", params: { command: "rm -f sum.js" } }] }, { text: "Removed." }]
    })
    for (const argv of [
      ["run", "tidy up", "--dney", "run_shell:rm*", "--approval-mode", "auto"],
      ["run", "tidy up", "--bogus-flag", "--approval-mode", "auto"],
      ["run", "tidy up", "--approval-mod", "auto"]
    ]) {
      const r = muse([...argv, "--script", script], { sb, cwd: repo })
      expect(r.code).toBe(2)
      expect(r.stderr).toMatch(/unknown flag --\S+ for muse run/)
      expect(r.stdout).toBe("")
    }
    expect(muse(["run", "x", "--dney", "y", "--script", script], { sb, cwd: repo }).stderr).toContain(
      "did you mean --deny?"
    )
    // nothing ran, no session was started
    expect(fs.existsSync(path.join(repo, "sum.js"))).toBe(true)
    expect(fs.existsSync(path.join(sb.state, "sessions"))).toBe(false)
  })

  it('muse run -- "--text" sends the text as the task', () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "echo", { replies: [{ when: "--dney", steps: [{ text: "The task was read." }] }] })
    const r = muse(["run", "--script", script, "--output-format", "json", "--", "--dney", "is", "text"], {
      sb,
      cwd: repo
    })
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({ status: "completed", text: "The task was read." })
  })

  it("muse <unknown> --help is an error, not the main help", () => {
    const sb = sandbox()
    const r = muse(["bogus", "--help"], { sb })
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('unknown command "bogus"')
    expect(r.stdout).toBe("")
    const ok = muse(["run", "--help"], { sb })
    expect(ok.code).toBe(0)
    expect(ok.stdout).toContain("--approval-mode")
  })
})

describe("the strict flag table and the commands agree", () => {
  it("every flag a command's --help lists is known to the strict parser", () => {
    const sb = sandbox()
    for (const command of ["", ...Argv.commandNames]) {
      const r = muse([...(command ? [command] : []), "--help"], { sb })
      expect(r.code, `muse ${command} --help`).toBe(0)
      const listed = new Set([...r.stdout.matchAll(/(?<![\w-])--([a-z][a-z-]*)/g)].map((m) => m[1]!))
      // the main help lists every command with its flags
      const specs = command === "" ? Object.values(Argv.COMMANDS) : [Argv.COMMANDS[command]!]
      const known = new Set(specs.flatMap((c) => c.flags.filter((f) => !f.hidden).map((f) => f.name)))
      for (const name of listed) {
        expect(known.has(name), `--${name} (muse ${command} --help) is missing from Argv.COMMANDS`).toBe(true)
      }
    }
  })
})
