/**
 * A hostile repository: its own config and attributes try to run commands through every git call
 * the worktree service makes (allocation, diff, commit, a three-way merge), and a worker rewrites
 * its worktree's `.git` to point at the main repository.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Git } from "@musekit/node"
import { Effect } from "effect"
import { Worktrees } from "../src/index.js"
import { makeRepo, read, sh, tmpDir, write } from "./helpers.js"

/** git as muse runs it, for the test's own calls once the repository is hostile. */
const safe = (cwd: string, ...args: Array<string>) => {
  const r = Git.runSync(args, { cwd })
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`)
  return r.stdout.replace(/\n$/, "")
}

const HOOKS = [
  "pre-commit",
  "prepare-commit-msg",
  "commit-msg",
  "post-commit",
  "post-checkout",
  "post-merge",
  "pre-merge-commit",
  "reference-transaction",
  "post-index-change",
  "post-rewrite"
]

/**
 * Make `repo` hostile: everything its config or attributes can make git run touches a file in the
 * returned marker folder. Returns what ran so far.
 */
const makeHostile = (repo: string) => {
  const marks = tmpDir("muse-marks-")
  const evil = path.join(tmpDir("muse-evil-"), "evil.sh")
  // a filter must pass the content through; a merge driver leaves %A as it is
  fs.writeFileSync(evil, `#!/bin/sh\ntouch "${marks}/$1"\n[ "$1" = merge ] && exit 0\ncat\n`, { mode: 0o755 })
  const included = path.join(repo, "hostile.cfg")
  fs.writeFileSync(included, `[filter "inc"]\n\tclean = ${evil} inc-clean\n\tsmudge = ${evil} inc-smudge\n`)
  fs.appendFileSync(
    path.join(repo, ".git", "config"),
    [
      "[core]",
      `\tfsmonitor = ${evil} fsmonitor`,
      `\tpager = ${evil} pager`,
      `\teditor = ${evil} editor`,
      `\tsshCommand = ${evil} ssh`,
      '[filter "evil"]',
      `\tclean = ${evil} clean`,
      `\tsmudge = ${evil} smudge`,
      "\trequired = true",
      '[merge "evil"]',
      `\tdriver = ${evil} merge %A %O %B`,
      '[diff "evil"]',
      `\ttextconv = ${evil} textconv`,
      `\tcommand = ${evil} diffcmd`,
      "[include]",
      "\tpath = ../hostile.cfg",
      ""
    ].join("\n")
  )
  for (const hook of HOOKS) {
    fs.writeFileSync(path.join(repo, ".git", "hooks", hook), `#!/bin/sh\ntouch "${marks}/${hook}"\n`, { mode: 0o755 })
  }
  return () => fs.readdirSync(marks).sort()
}

describe("Worktrees in a hostile repository", () => {
  it.live("allocation, diff, commit and a three-way merge run none of the repository's commands", () =>
    Effect.gen(function* () {
      const repo = makeRepo({
        ".gitattributes": "*.txt filter=evil merge=evil diff=evil\n*.inc filter=inc\n",
        "shared.txt": "top\nmiddle\nbottom\n",
        "data.inc": "inc\n"
      })
      const ran = makeHostile(repo)
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const a = yield* wt.allocate({ agent: "worker-1" })
      expect(read(path.join(a.path, "shared.txt"))).toBe("top\nmiddle\nbottom\n")
      // the worker changes the end of a file main changes at the start, and adds files
      write(path.join(a.path, "shared.txt"), "top\nmiddle\nbottom (worker)\n")
      write(path.join(a.path, "new.txt"), "new\n")
      write(path.join(a.path, "more.inc"), "more\n")
      const diff = yield* wt.diff("worker-1")
      expect(diff).toContain("+bottom (worker)")
      expect(diff).toContain("+new")
      yield* wt.commit("worker-1", "work")
      write(path.join(repo, "shared.txt"), "top (main)\nmiddle\nbottom\n")
      safe(repo, "commit", "-q", "-am", "main moves on")
      expect(ran()).toEqual([])

      const merged = yield* wt.merge("worker-1")
      expect(merged).toMatchObject({ _tag: "Merged", changed: true })
      // git's own three-way merge did the driver's job
      expect(read(path.join(repo, "shared.txt"))).toBe("top (main)\nmiddle\nbottom (worker)\n")
      expect(read(path.join(repo, "new.txt"))).toBe("new\n")
      expect(safe(repo, "status", "--porcelain", "--untracked-files=no")).toBe("")
      expect(ran()).toEqual([])

      // the same repository with a plain git runs them (so the setup really is hostile)
      write(path.join(repo, "shared.txt"), "changed\n")
      sh(repo, "add", "shared.txt")
      sh(repo, "diff", "--cached", "HEAD")
      expect(ran()).toEqual(expect.arrayContaining(["clean", "fsmonitor", "post-index-change", "diffcmd"]))
    })
  )

  it.live(
    "a worktree whose .git was rewritten to point at the main repository: git refused, the branch untouched",
    () =>
      Effect.gen(function* () {
        const repo = makeRepo()
        const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
        const a = yield* wt.allocate({ agent: "worker-1" })
        write(path.join(a.path, "stolen.txt"), "should never reach main\n")
        const dotGit = path.join(a.path, ".git")
        const original = read(dotGit)
        const headBefore = sh(repo, "rev-parse", "HEAD")
        fs.writeFileSync(dotGit, `gitdir: ${path.join(repo, ".git")}\n`)

        for (const attempt of [wt.commit("worker-1", "steal"), wt.merge("worker-1"), wt.diff("worker-1")]) {
          const e = yield* Effect.flip(attempt as Effect.Effect<unknown, Worktrees.WorktreeError>)
          expect(e._tag).toBe("WorktreeTampered")
          expect(e.message).toContain(`points at ${path.join(repo, ".git")}`)
          expect(e.message).toContain("Refusing to run git there")
        }
        expect(sh(repo, "rev-parse", "HEAD")).toBe(headBefore)
        expect(sh(repo, "status", "--porcelain")).toBe("")
        expect(fs.existsSync(path.join(repo, "stolen.txt"))).toBe(false)

        // a .git replaced by a repository of its own is refused too
        fs.rmSync(dotGit)
        fs.mkdirSync(dotGit)
        const e = yield* Effect.flip(wt.commit("worker-1", "steal"))
        expect(e.message).toContain("is a directory")
        expect(sh(repo, "rev-parse", "HEAD")).toBe(headBefore)

        // after a restart, reattaching points it back at its own admin folder, and work goes on
        const again = yield* Worktrees.make({ repo, sessionId: "s1" })
        const [back] = yield* again.reattach([a])
        expect(back?.status).toBe("attached")
        expect(read(dotGit)).toBe(original)
        yield* again.commit("worker-1", "work")
        expect(yield* again.merge("worker-1")).toMatchObject({ _tag: "Merged", changed: true })
        expect(read(path.join(repo, "stolen.txt"))).toBe("should never reach main\n")
        expect(sh(repo, "log", "-1", "--format=%P").split(" ")).toHaveLength(2)
      })
  )
})
