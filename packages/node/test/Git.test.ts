import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Git } from "../src/index.js"

const dirs: Array<string> = []
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

const tmp = () => {
  const d = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-git-")))
  dirs.push(d)
  return d
}

// the test's own git calls never see the machine's configuration
const home = tmp()
fs.writeFileSync(path.join(home, "gitconfig"), "")
const plainEnv = { ...process.env, GIT_CONFIG_GLOBAL: path.join(home, "gitconfig"), GIT_CONFIG_NOSYSTEM: "1" }
process.env.GIT_CONFIG_GLOBAL = plainEnv.GIT_CONFIG_GLOBAL

/** Plain, unhardened git (what a user's own `git` does). */
const plain = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, env: plainEnv, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/** A repository whose own config runs `marker <name>` from fsmonitor, hooks and a filter named `a=b`. */
const hostileRepo = () => {
  const base = tmp()
  const repo = path.join(base, "repo")
  const marks = path.join(base, "marks")
  fs.mkdirSync(repo)
  fs.mkdirSync(marks)
  plain(repo, "init", "-q", "-b", "main")
  plain(repo, "config", "user.name", "T")
  plain(repo, "config", "user.email", "t@example.invalid")
  fs.writeFileSync(path.join(repo, "a.txt"), "one\n")
  fs.writeFileSync(path.join(repo, ".gitattributes"), "*.txt filter=a=b\n")
  plain(repo, "add", "-A")
  plain(repo, "commit", "-q", "-m", "init")
  const evil = path.join(base, "evil.sh")
  fs.writeFileSync(evil, `#!/bin/sh\ntouch "${marks}/$1"\ncat\n`, { mode: 0o755 })
  fs.appendFileSync(
    path.join(repo, ".git", "config"),
    `[core]\n\tfsmonitor = ${evil} fsmonitor\n[filter "a=b"]\n\tclean = ${evil} clean\n\tsmudge = ${evil} smudge\n\trequired = true\n`
  )
  for (const hook of ["post-index-change", "reference-transaction", "post-commit"]) {
    fs.writeFileSync(path.join(repo, ".git", "hooks", hook), `#!/bin/sh\ntouch "${marks}/${hook}"\n`, { mode: 0o755 })
  }
  fs.writeFileSync(path.join(repo, "a.txt"), "two\n")
  return { repo, marks, ran: () => fs.readdirSync(marks).sort() }
}

describe("Git", () => {
  it("knows which commands may run a filter or driver", () => {
    expect(Git.readsContent(["status", "--porcelain"])).toBe(true)
    expect(Git.readsContent(["-c", "merge.conflictStyle=diff3", "merge", "--no-ff", "x"])).toBe(true)
    expect(Git.readsContent(["worktree", "add", "--no-checkout", "p", "b"])).toBe(true)
    expect(Git.readsContent(["worktree", "list", "--porcelain"])).toBe(false)
    expect(Git.readsContent(["rev-parse", "HEAD"])).toBe(false)
    expect(Git.readsContent(["cat-file", "blob", "abc"])).toBe(false)
    expect(Git.readsContent(["cat-file", "--filters", "HEAD:a.txt"])).toBe(true)
    expect(Git.readsContent(["some-new-command"])).toBe(true)
  })

  it("overrides the drivers a repository defines, and keeps the user's global ones", () => {
    const out = [
      ["global", "filter.lfs.clean\ngit-lfs clean -- %f"],
      ["global", "filter.lfs.process\ngit-lfs filter-process"],
      ["local", "filter.Crypt=x.smudge\nrun-me"],
      ["worktree", "merge.evil.driver\nrun-me %A"],
      ["local", "merge.default\nevil"],
      ["local", "diff.pic.textconv\nrun-me"],
      ["local", "diff.pic.command\nrun-me"],
      ["local", "protocol.ext.allow\nalways"],
      ["local", "user.name\nSomeone"],
      ["local", "core.bare"]
    ]
      .map(([scope, rec]) => `${scope}\0file:${scope === "global" ? "/home/u/.gitconfig" : ".git/config"}\0${rec}\0`)
      .join("")
    const entries = Git.parseConfigList(out)
    expect(entries.at(-1)).toEqual({ scope: "local", origin: "file:.git/config", key: "core.bare", value: undefined })
    expect(Object.fromEntries(Git.repoOverrides(entries))).toEqual({
      "filter.Crypt=x.clean": "",
      "filter.Crypt=x.smudge": "",
      "filter.Crypt=x.process": "",
      "filter.Crypt=x.required": "false",
      "merge.evil.driver": Git.BUILTIN_MERGE,
      "merge.default": "text",
      "diff.pic.textconv": "cat",
      "diff.pic.command": "false",
      "protocol.ext.allow": "never"
    })
  })

  it("leaves out the environment that redirects git or names programs for it", () => {
    const env = Git.environment(
      [["filter.x.clean", ""]],
      { GIT_INDEX_FILE: "/tmp/i" },
      {
        PATH: "/usr/bin",
        HOME: "/home/u",
        GIT_DIR: "/elsewhere/.git",
        GIT_WORK_TREE: "/elsewhere",
        GIT_EXEC_PATH: "/evil/libexec",
        GIT_CONFIG_PARAMETERS: "'core.fsmonitor'='evil'",
        GIT_CONFIG_COUNT: "1",
        GIT_CONFIG_KEY_0: "core.fsmonitor",
        GIT_CONFIG_VALUE_0: "evil",
        GIT_SSH_COMMAND: "evil",
        GIT_EXTERNAL_DIFF: "evil",
        SSH_ASKPASS: "evil",
        GIT_AUTHOR_NAME: "Ada",
        GIT_CONFIG_GLOBAL: "/home/u/.gitconfig"
      }
    )
    for (const k of ["GIT_DIR", "GIT_WORK_TREE", "GIT_EXEC_PATH", "GIT_CONFIG_PARAMETERS", "GIT_SSH_COMMAND"]) {
      expect(env[k], k).toBeUndefined()
    }
    expect(env.GIT_EXTERNAL_DIFF).toBeUndefined()
    expect(env.SSH_ASKPASS).toBeUndefined()
    expect(env.GIT_AUTHOR_NAME).toBe("Ada")
    expect(env.GIT_CONFIG_GLOBAL).toBe("/home/u/.gitconfig")
    expect(env.GIT_INDEX_FILE).toBe("/tmp/i")
    expect(env.GIT_CONFIG_NOSYSTEM).toBe("1")
    expect(env.GIT_TERMINAL_PROMPT).toBe("0")
    const count = Number(env.GIT_CONFIG_COUNT)
    expect(count).toBe(Git.fixedConfig.length + 1)
    const pairs = Array.from({ length: count }, (_, i) => [env[`GIT_CONFIG_KEY_${i}`], env[`GIT_CONFIG_VALUE_${i}`]])
    expect(pairs).toContainEqual(["core.fsmonitor", "false"])
    expect(pairs).toContainEqual(["core.hooksPath", "/dev/null"])
    expect(pairs).toContainEqual(["protocol.allow", "never"])
    expect(pairs.at(-1)).toEqual(["filter.x.clean", ""])
  })

  it("runs nothing the repository's config names: fsmonitor, hooks, a filter whose name holds '='", () => {
    const { repo, ran } = hostileRepo()
    expect(Git.runSync(["status", "--porcelain"], { cwd: repo }).stdout).toContain("a.txt")
    expect(Git.runSync(["add", "-A"], { cwd: repo }).status).toBe(0)
    const commit = Git.runSync(["commit", "-q", "-m", "two"], { cwd: repo })
    expect(commit.status, commit.stderr).toBe(0)
    expect(Git.runSync(["rev-parse", "--is-inside-work-tree"], { cwd: repo }).stdout.trim()).toBe("true")
    expect(ran()).toEqual([])
    // the same repository with a plain git: every one of them runs (so the setup really is hostile)
    fs.writeFileSync(path.join(repo, "a.txt"), "three\n")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-q", "-m", "three")
    expect(ran()).toEqual(expect.arrayContaining(["clean", "fsmonitor", "post-commit", "reference-transaction"]))
  })

  it("lists the configuration again when a file behind it changes or appears", async () => {
    const { repo, marks, ran } = hostileRepo()
    const evil = path.join(path.dirname(marks), "evil.sh")
    // no filter of its own yet, and an include that points at nothing (yet)
    const config = path.join(repo, ".git", "config")
    fs.writeFileSync(config, fs.readFileSync(config, "utf8").replace(/\[filter "a=b"\][^[]*/s, ""))
    fs.appendFileSync(config, "[include]\n\tpath = ../later.cfg\n")
    // files changed in the last 2 s are never trusted to be unchanged: let them age
    await new Promise((r) => setTimeout(r, 2100))
    expect(Git.runSync(["status", "--porcelain"], { cwd: repo }).status).toBe(0)
    // the include target appears, defining the filter the attributes name
    fs.writeFileSync(path.join(repo, "later.cfg"), `[filter "a=b"]\n\tclean = ${evil} clean-included\n`)
    expect(Git.runSync(["add", "-A"], { cwd: repo }).status).toBe(0)
    // the repository's own config changes
    fs.appendFileSync(config, `[filter "a=b"]\n\tsmudge = ${evil} smudge-local\n`)
    fs.rmSync(path.join(repo, "a.txt"))
    expect(Git.runSync(["checkout", "--", "a.txt"], { cwd: repo }).status).toBe(0)
    expect(ran()).toEqual([])
    expect(fs.readFileSync(path.join(repo, "a.txt"), "utf8")).toBe("two\n")
  })

  it("run() is runSync() without blocking: same hardening, same answers", async () => {
    const { repo, ran } = hostileRepo()
    expect(await Git.checkVersion()).toBeUndefined()
    const status = await Git.run(["status", "--porcelain"], { cwd: repo })
    expect(status.status, status.stderr).toBe(0)
    expect(status.stdout).toBe(Git.runSync(["status", "--porcelain"], { cwd: repo }).stdout)
    expect(status.stdout).toContain("a.txt")
    expect((await Git.run(["add", "-A"], { cwd: repo })).status).toBe(0)
    const commit = await Git.run(["commit", "-q", "-F", "-"], { cwd: repo, input: "from stdin\n" })
    expect(commit.status, commit.stderr).toBe(0)
    expect(Git.runSync(["log", "-1", "--format=%s"], { cwd: repo }).stdout.trim()).toBe("from stdin")
    expect(ran()).toEqual([])
    const outside = await Git.run(["rev-parse", "--is-inside-work-tree"], { cwd: os.tmpdir() })
    expect(outside.status).not.toBe(0)
  })

  it("runSync() answers as run() does when the output passes a megabyte", async () => {
    const { repo } = hostileRepo()
    const note = path.join(path.dirname(repo), "message")
    fs.writeFileSync(note, `${"x".repeat(99)}\n`.repeat(20_000))
    plain(repo, "commit", "-q", "--allow-empty", "-F", note)
    const args = ["log", "-1", "--format=%B"]
    const sync = Git.runSync(args, { cwd: repo })
    expect(sync.error?.message).toBeUndefined()
    expect(sync.status).toBe(0)
    expect(sync.stdout.length).toBeGreaterThan(2_000_000)
    expect(sync.stdout).toBe((await Git.run(args, { cwd: repo })).stdout)
  })

  it("runs one sequence of steps: a failed configuration listing ends it before the command", () => {
    expect(Git.versionProblem()).toBeUndefined()
    const cwd = tmp()
    const steps = Git.steps<Git.Ran>(["diff"], { cwd })
    let step = steps.next()
    // (the version is known by now: the listing comes first)
    expect(step.done).toBe(false)
    expect(step.value).toMatchObject({ args: Git.LIST_CONFIG, cwd })
    const failed: Git.Ran = { status: 128, stdout: "", stderr: "fatal: bad config line 1" }
    step = steps.next(failed)
    expect(step).toEqual({ done: true, value: failed })
    // a command that reads no contents is the only step
    const plainSteps = Git.steps<Git.Ran>(["rev-parse", "HEAD"], { cwd, input: "in" })
    const only = plainSteps.next()
    expect(only.value).toMatchObject({ args: ["rev-parse", "HEAD"], cwd, input: "in" })
    const answer: Git.Ran = { status: 0, stdout: "abc\n", stderr: "" }
    expect(plainSteps.next(answer)).toEqual({ done: true, value: answer })
  })

  it("a command that talks to a remote may use file, http(s) and ssh, never ext::, and only outside a repository", () => {
    const { repo } = hostileRepo()
    const out = tmp()
    // by default no transport at all, not even a local path
    const refused = Git.runSync(["clone", "--quiet", "--", repo, path.join(out, "a")], { cwd: out })
    expect(refused.status).not.toBe(0)
    expect(refused.stderr).toContain("transport 'file' not allowed")
    const cloned = Git.runSync(["clone", "--quiet", "--", repo, path.join(out, "b")], { cwd: out, remote: true })
    expect(cloned.status, cloned.stderr).toBe(0)
    expect(fs.existsSync(path.join(out, "b", ".gitattributes"))).toBe(true)
    const listed = Git.runSync(["ls-remote", "--", `file://${repo}`, "HEAD"], { cwd: out, remote: true })
    expect(listed.stdout).toMatch(/^[0-9a-f]{40}\tHEAD/)
    // a user's config that allows every transport does not let ext:: run a program
    const marker = path.join(out, "ext-ran")
    const globalFile = path.join(out, "allow-all")
    fs.writeFileSync(globalFile, "[protocol]\n\tallow = always\n")
    const ext = Git.runSync(["ls-remote", "--", `ext::sh -c touch% ${marker}`, "HEAD"], {
      cwd: out,
      remote: true,
      env: { GIT_CONFIG_GLOBAL: globalFile }
    })
    expect(ext.status).not.toBe(0)
    expect(ext.stderr).toContain("transport 'ext' not allowed")
    expect(fs.existsSync(marker)).toBe(false)
    // the machine's system config (credential helpers, CA settings, URL rewrites) and the caller's
    // transport variables apply to it
    const systemFile = path.join(out, "system-config")
    fs.writeFileSync(systemFile, `[url "file://${repo}"]\n\tinsteadOf = muse-system:\n`)
    const saved = process.env.GIT_CONFIG_SYSTEM
    process.env.GIT_CONFIG_SYSTEM = systemFile
    try {
      const viaSystem = Git.runSync(["ls-remote", "--", "muse-system:", "HEAD"], { cwd: out, remote: true })
      expect(viaSystem.status, viaSystem.stderr).toBe(0)
      expect(viaSystem.stdout).toMatch(/^[0-9a-f]{40}\tHEAD/)
      // an ordinary command still reads no system config
      expect(Git.runSync(["config", "--get", `url.file://${repo}.insteadof`], { cwd: out }).stdout).toBe("")
    } finally {
      if (saved === undefined) delete process.env.GIT_CONFIG_SYSTEM
      else process.env.GIT_CONFIG_SYSTEM = saved
    }
    // inside a repository, whose config could name the ssh command or a credential helper: refused
    const inside = Git.runSync(["ls-remote", "--", `file://${repo}`, "HEAD"], { cwd: repo, remote: true })
    expect(inside.status).not.toBe(0)
    expect(inside.stderr).toContain("must run outside any repository")
    // a plain folder inside one: git does not look above it, so the repository's config is not in scope
    const sub = path.join(repo, "plain")
    fs.mkdirSync(sub)
    const below = Git.runSync(["ls-remote", "--", `file://${repo}`, "HEAD"], { cwd: sub, remote: true })
    expect(below.status, below.stderr).toBe(0)
    // and what was listed there for it is not taken for a command that does see the repository
    const { repo: other, ran } = hostileRepo()
    const plainDir = path.join(other, "plain")
    fs.mkdirSync(plainDir)
    Git.runSync(["ls-remote", "--", `file://${repo}`, "HEAD"], { cwd: plainDir, remote: true })
    Git.runSync(["diff", "--", "../a.txt"], { cwd: plainDir })
    expect(ran()).toEqual([])
  })

  it("says when git is missing or too old", () => {
    expect(Git.versionProblem()).toBeUndefined()
    expect(Git.MIN_VERSION).toEqual([2, 31])
  })
})
