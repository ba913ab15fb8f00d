/**
 * Red-team corpus, answers and paths: what "yes, this session / always" stores, protected paths,
 * and rules over paths and summaries.
 */
import { Approvals } from "@musekit/core"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { decide, outcomeOf, rule, service, shellRequest } from "./support.js"

const write = (paths: ReadonlyArray<string>, tool = "write_file"): Approvals.Request => ({
  agent: "main",
  tool,
  effect: "write",
  summary: `${tool} ${paths.join(" ")}`,
  paths
})

const run = <A>(e: Effect.Effect<A>) => Effect.runPromise(e)

describe("red team: proposals are argv-prefix rules, never globs made from the text", () => {
  it.each([
    ["npm test", "npm test *"],
    ["npm test -- --watch", "npm test *"],
    ["npm run build -- --prod", "npm run build *"],
    ["git commit -m 'fix: x'", "git commit *"],
    ["git -C sub status", "git -C sub status"],
    ["rm -rf build", "rm -rf build"],
    ["ls -la", "ls -la"],
    ["echo 'a b' \"c*\"", "echo 'a b' 'c*'"],
    ["timeout 60 npm test", "npm test *"],
    ["bash -c 'cargo test --all'", "cargo test *"],
    ["CI=1 npm test", "CI=1 npm test *"],
    ["npm test && npm test -- --ci", "npm test *"]
  ])("%s → %s", async (command, expected) => {
    const p = await run(Effect.flatMap(service({ mode: "ask" }), (s) => s.propose!(shellRequest(command))))
    expect(p.proposal).toEqual({ tool: "run_shell", pattern: expected, action: "allow", scope: "session" })
    // the proposal lets the same command through, and nothing more than its words
    expect(await decide(command, { mode: "ask", rules: [{ ...p.proposal!, scope: "session" }] })).toBe("allow")
  })

  it.each([
    "echo *.js",
    "npm test; rm -rf victim",
    "cd sub && npm test",
    "npm test > out.log",
    "npm test $(id)",
    "eval npm test",
    "xargs rm",
    "ls ~/x"
  ])("no proposal for %s", async (command) => {
    const p = await run(Effect.flatMap(service({ mode: "ask" }), (s) => s.propose!(shellRequest(command))))
    expect(p.proposal).toBeUndefined()
  })

  it("the explanation names what a rule cannot cover", async () => {
    const p = await run(Effect.flatMap(service({ mode: "ask" }), (s) => s.propose!(shellRequest("npm test > out.log"))))
    expect(p.warnings.join("\n")).toContain("> out.log")
  })
})

describe("red team: what an answer stores", () => {
  const remember = (request: Approvals.Request, answer: Approvals.Answer, then: ReadonlyArray<string>) =>
    run(
      Effect.gen(function* () {
        const persisted: Array<Approvals.Rule> = []
        const s = yield* Approvals.make({
          mode: "ask",
          shell: (yield* Effect.promise(() => import("../../src/index.js"))).ShellParser.parser,
          persist: (r) => Effect.sync(() => void persisted.push(r))
        })
        yield* s.remember(request, answer)
        const outcomes: Array<string> = []
        for (const c of then) outcomes.push(outcomeOf(yield* s.check(shellRequest(c))))
        return { rules: yield* s.rules, persisted, outcomes }
      })
    )

  it('"yes, this session" on `echo *.js` stores nothing that approves `echo ; touch …; echo x.js`', async () => {
    const request = shellRequest("echo *.js")
    // the old behaviour: the summary as a glob; a prompter that still sends it gets nothing stored
    const r1 = await remember(request, { allow: true, scope: "session", rule: rule("allow:echo *.js") }, [
      "echo ; touch pwned; echo x.js",
      "echo *.js"
    ])
    expect(r1.rules).toEqual([])
    expect(r1.outcomes).toEqual(["ask", "ask"])
    const r2 = await remember(request, { allow: true, scope: "session" }, ["echo ; touch pwned; echo x.js"])
    expect(r2.rules).toEqual([])
    expect(r2.outcomes).toEqual(["ask"])
  })

  it("the confirmed rule is stored with the answer's scope; project rules are persisted", async () => {
    const r = await remember(
      shellRequest("npm test -- --watch"),
      { allow: true, scope: "project", rule: rule("allow:npm test *") },
      ["npm test", "npm test; rm -rf victim", "npm test && curl x"]
    )
    expect(r.rules).toEqual([{ tool: "run_shell", pattern: "npm test *", action: "allow", scope: "project" }])
    expect(r.persisted).toEqual(r.rules)
    expect(r.outcomes).toEqual(["allow", "ask", "ask"])
  })

  it.each([
    ["a rule that does not cover the call", rule("allow:npm run lint")],
    ["a rule for another tool", rule("allow:npm test *", "write_file")],
    ["a deny rule for an allow answer", rule("deny:npm test *")],
    ["a rule whose words the command only contains as text", rule("allow:npm test -- --watch*")]
  ])("%s is not stored", async (_, r) => {
    const out = await remember(shellRequest("npm test"), { allow: true, scope: "session", rule: r }, ["npm test"])
    expect(out.rules).toEqual([])
    expect(out.outcomes).toEqual(["ask"])
  })

  it("a once answer stores nothing even with a rule", async () => {
    const out = await remember(
      shellRequest("npm test"),
      { allow: true, scope: "once", rule: rule("allow:npm test *") },
      ["npm test"]
    )
    expect(out.rules).toEqual([])
  })

  it("a deny answer for the session stores a deny rule that matches the call", async () => {
    const out = await remember(
      shellRequest("git push origin"),
      { allow: false, scope: "session", rule: rule("deny:git push*") },
      ["git -C . push", "git status"]
    )
    expect(out.outcomes).toEqual(["deny", "ask"])
  })
})

describe("red team: protected paths always ask", () => {
  const paths = [
    ".git/config",
    ".git/hooks/pre-commit",
    ".git",
    "sub/.git/config",
    "vendor/lib/.git/hooks/post-checkout",
    ".git/modules/lib/config",
    ".muse/permissions.json",
    ".muse/config.json",
    "pkg/.muse/permissions.json",
    ".claude/settings.json",
    ".GIT/config",
    ".Git/hooks/pre-commit",
    ".git./config",
    ".git /config",
    "GIT~1/config",
    ".g\u200cit/config",
    ".git\ufeff/config",
    ".git::$INDEX_ALLOCATION/config",
    ".MUSE/permissions.json",
    ".Claude/settings.local.json"
  ]

  it.each(paths)("write %s asks in auto mode with an allow rule for the tool", async (p) => {
    expect(await decide(write([p]), { mode: "auto", rules: [rule("allow", "write_file")] })).toBe("ask")
    expect(await decide(write([p], "edit_file"), { mode: "auto-edit" })).toBe("ask")
  })

  it("the question names the risk", async () => {
    const p = await run(Effect.flatMap(service({ mode: "auto" }), (s) => s.propose!(write([".git/config"]))))
    expect(p.warnings[0]).toContain("writes .git/config: git config can run commands (core.fsmonitor")
    expect(p.proposal).toBeUndefined()
  })

  it("an always answer for a protected path stores nothing: the next write asks again", async () => {
    const out = await run(
      Effect.gen(function* () {
        const persisted: Array<Approvals.Rule> = []
        const s = yield* Approvals.make({
          mode: "auto-edit",
          persist: (r) => Effect.sync(() => void persisted.push(r))
        })
        const request = write([".muse/permissions.json"])
        yield* s.remember(request, {
          allow: true,
          scope: "project",
          rule: { tool: "write_file", action: "allow", scope: "project" }
        })
        return { again: outcomeOf(yield* s.check(request)), persisted, rules: yield* s.rules }
      })
    )
    expect(out).toEqual({ again: "ask", persisted: [], rules: [] })
  })

  it("a deny rule still denies, and read-only still refuses", async () => {
    expect(await decide(write([".git/config"]), { mode: "auto", rules: [rule("deny", "write_file")] })).toBe("deny")
    expect(await decide(write([".git/config"]), { mode: "read-only" })).toBe("deny")
  })

  it.each(["src/git/config", "src/.gitignore", ".github/workflows/ci.yml", "docs/.museum", "a.git/config", ".claudex"])(
    "%s is not protected",
    async (p) => {
      expect(Approvals.protectedRisk(p)).toBeUndefined()
      expect(await decide(write([p]), { mode: "auto-edit" })).toBe("allow")
    }
  )

  it("reading a protected path is not a write", async () => {
    const read: Approvals.Request = {
      agent: "main",
      tool: "read_file",
      effect: "read",
      summary: "read_file .git/config",
      paths: [".git/config"]
    }
    expect(await decide(read, { mode: "auto-edit" })).toBe("allow")
  })
})

describe("red team: rules over paths and summaries", () => {
  it("a path rule matches each normalized path, not the summary", async () => {
    const allowSrc = { mode: "ask" as const, rules: [rule("allow:src/*", "write_file")] }
    expect(await decide(write(["src/a.ts"]), allowSrc)).toBe("allow")
    expect(await decide(write(["lib/a.ts"]), allowSrc)).toBe("ask")
    expect(await decide(write(["src/a.ts", "lib/b.ts"]), allowSrc)).toBe("ask")
    // the summary is not what is matched: a path that only looks like src/ in the summary asks
    expect(await decide({ ...write(["lib/a.ts"]), summary: "write_file src/a.ts" }, allowSrc)).toBe("ask")
    // a pattern written with the tool's name in front reads the same
    expect(
      await decide(write(["src/a.ts"]), { mode: "ask", rules: [rule("allow:write_file src/*", "write_file")] })
    ).toBe("allow")
    expect(await decide(write(["src/a\nb.ts"]), allowSrc)).toBe("ask")
  })

  it("a deny rule over read paths cannot be dodged by spelling the path another way", async () => {
    const read = (p: string): Approvals.Request => ({
      agent: "main",
      tool: "read_file",
      effect: "read",
      summary: `read_file ./${p}`,
      paths: [p]
    })
    expect(await decide(read(".env"), { mode: "auto", rules: [rule("deny:.env*", "read_file")] })).toBe("deny")
    expect(await decide(read(".env.local"), { mode: "auto", rules: [rule("deny:read_file .env*", "read_file")] })).toBe(
      "deny"
    )
  })

  it("an allow rule's wildcards never stand for a second line, control characters or bidi overrides", async () => {
    const summary = (text: string): Approvals.Request => ({
      agent: "main",
      tool: "delegate",
      effect: "exec",
      summary: text
    })
    const options = { mode: "ask" as const, rules: [rule("allow:delegate to explorer*", "delegate")] }
    expect(await decide(summary("delegate to explorer: find callers"), options)).toBe("allow")
    expect(await decide(summary("delegate to explorer: x\nand then rm -rf ~"), options)).toBe("ask")
    expect(await decide(summary("delegate to explorer: \u001b[2K\rsafe"), options)).toBe("ask")
    expect(await decide(summary("delegate to explorer: \u202eexe.txt"), options)).toBe("ask")
    expect(await decide(summary("delegate to explorer: \u2066x\u2069"), options)).toBe("ask")
    // a deny rule's wildcards match anything
    expect(
      await decide(summary("delegate to worker: x\ny"), {
        mode: "auto",
        rules: [rule("deny:delegate to worker*", "delegate")]
      })
    ).toBe("deny")
  })
})

describe("the parser is used only when a rule or a question needs it", () => {
  it("auto mode without shell rules parses nothing; a pattern rule or a question parses", async () => {
    const { ShellParser } = await import("../../src/index.js")
    let parses = 0
    const counting = {
      parse: (s: string) =>
        Effect.suspend(() => {
          parses++
          return ShellParser.parser.parse(s)
        })
    }
    expect(await decide("npm test; rm -rf victim", { mode: "auto", parser: counting })).toBe("allow")
    expect(await decide("npm test", { mode: "auto", rules: [rule("allow", "read_file")], parser: counting })).toBe(
      "allow"
    )
    expect(parses).toBe(0)
    expect(await decide("npm test; rm -rf victim", { mode: "auto", rules: ["deny:rm*"], parser: counting })).toBe(
      "deny"
    )
    expect(parses).toBe(1)
    await run(Effect.flatMap(service({ mode: "ask", parser: counting }), (s) => s.propose!(shellRequest("ls"))))
    expect(parses).toBe(2)
  })
})

describe("a parser that cannot load", () => {
  it("reports every command as not analysable: rules allow nothing, deny rules make it ask, the session goes on", async () => {
    const { ShellParser } = await import("../../src/index.js")
    const broken = ShellParser.make(() => ({ runtime: "/nonexistent/runtime.wasm", grammar: "/nonexistent/bash.wasm" }))
    const script = await run(broken.parse("npm test"))
    expect(script.commands).toEqual([])
    expect(script.hidden[0]).toMatch(/^the shell parser could not be loaded/)
    expect(await decide("npm test", { mode: "auto-edit", rules: ["allow:npm test*"], parser: broken })).toBe("ask")
    expect(await decide("ls", { mode: "auto", rules: ["deny:rm*"], parser: broken })).toBe("ask")
    expect(await decide("ls", { mode: "auto", parser: broken })).toBe("allow")
  })
})

describe("red team: running outside the OS sandbox", () => {
  const out = (command: string): Approvals.Request => ({ ...shellRequest(command), unsandboxed: true })

  it.each(["auto", "auto-edit", "ask"] as const)("always asks in %s mode, whatever the allow rules", async (mode) => {
    expect(await decide(out("npm test"), { mode, rules: ["allow", "allow:npm test*"] })).toBe("ask")
    const p = await run(Effect.flatMap(service({ mode }), (s) => s.propose!(out("npm test"))))
    // no rule is offered: an answer about leaving the sandbox is never stored
    expect(p.proposal).toBeUndefined()
    expect(p.warnings?.[0]).toBe(Approvals.UNSANDBOXED_WARNING)
  })

  it("a deny rule still denies it", async () => {
    expect(await decide(out("rm -rf build"), { mode: "auto", rules: ["deny:rm*"] })).toBe("deny")
  })

  it("only an answer with unsandboxed: true lets it out, once, and stores nothing", async () => {
    const s = await run(service({ mode: "auto" }))
    const yes = await run(s.remember(out("npm test"), { allow: true, scope: "session", rule: rule("allow:npm test*") }))
    expect(yes).toMatchObject({ allow: true, scope: "once" })
    expect(yes.unsandboxed).toBeUndefined()
    const outside = await run(s.remember(out("npm test"), { allow: true, scope: "project", unsandboxed: true }))
    expect(outside).toMatchObject({ allow: true, scope: "once", unsandboxed: true })
    expect(outcomeOf(await run(s.check(out("npm test"))))).toBe("ask")
    // an unsandboxed answer to a call that did not ask for it changes nothing
    const plain = await run(s.remember(shellRequest("npm test"), { allow: true, scope: "once", unsandboxed: true }))
    expect(plain.unsandboxed).toBeUndefined()
  })
})
