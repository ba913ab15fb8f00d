import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option } from "effect"
import { Paths, Worktrees } from "../src/index.js"
import { branches, code, commitAll, makeRepo, read, sh, worktreePaths, write } from "./helpers.js"

const agents = (n: number) => Array.from({ length: n }, (_, i) => `worker-${i + 1}`)

const inMain = (repo: string, f: string) => fs.existsSync(path.join(repo, f))

describe("Worktrees allocation", () => {
  it.live("16 agents allocated at once get 16 worktrees, outside the main checkout", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const base = sh(repo, "rev-parse", "HEAD")
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      expect(wt.base).toBe(base)
      const all = yield* Effect.forEach(agents(16), (agent) => wt.allocate({ agent }), { concurrency: "unbounded" })
      expect(new Set(all.map((a) => a.path)).size).toBe(16)
      expect(worktreePaths(repo)).toHaveLength(17)
      for (const a of all) {
        expect(a.branch).toBe(`muse/s1/${a.agent}`)
        expect(a.base).toBe(base)
        expect(a.path).toBe(path.join(path.dirname(repo), ".muse-worktrees", "repo", "s1", a.agent))
        expect(Paths.isWithin(repo, a.path)).toBe(false)
        expect(read(path.join(a.path, "a.txt"))).toBe("one\ntwo\nthree\n")
        expect(sh(a.path, "status", "--porcelain")).toBe("")
        expect(sh(a.path, "rev-parse", "--abbrev-ref", "HEAD")).toBe(a.branch)
        expect(sh(repo, "rev-parse", a.branch)).toBe(base)
      }
      expect((yield* wt.list).length).toBe(16)
      // allocating an agent again returns its worktree
      expect(yield* wt.allocate({ agent: "worker-3" })).toEqual(all[2])
    })
  )

  it.live("two sessions fanning out 16 agents each on one repository at the same time", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const [a, b] = yield* Effect.all([
        Worktrees.make({ repo, sessionId: "left" }),
        Worktrees.make({ repo, sessionId: "right" })
      ])
      const made = yield* Effect.forEach(
        [a, b],
        (wt) => Effect.forEach(agents(16), (agent) => wt.allocate({ agent }), { concurrency: "unbounded" }),
        { concurrency: "unbounded" }
      )
      expect(made.flat()).toHaveLength(32)
      expect(worktreePaths(repo)).toHaveLength(33)
      for (const al of made.flat()) expect(sh(al.path, "status", "--porcelain")).toBe("")
    })
  )

  it.live("an interrupted fan-out leaves only complete worktrees behind", () =>
    Effect.gen(function* () {
      const files: Record<string, string> = {}
      for (let i = 0; i < 400; i++) files[`src/f${i}.ts`] = `export const v${i} = ${i}\n`
      const repo = makeRepo(files)
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const first = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(
        Effect.forEach(
          agents(16),
          (agent) => Effect.tap(wt.allocate({ agent }), () => Deferred.succeed(first, void 0)),
          {
            concurrency: "unbounded"
          }
        )
      )
      yield* Deferred.await(first)
      yield* Fiber.interrupt(fiber)
      const kept = yield* wt.list
      expect(kept.length).toBeGreaterThanOrEqual(1)
      expect(kept.length).toBeLessThan(16)
      expect(worktreePaths(repo).slice(1).sort()).toEqual(kept.map((a) => a.path).sort())
      expect(branches(repo).split("\n").sort()).toEqual(
        ["refs/heads/main", ...kept.map((a) => `refs/heads/${a.branch}`)].sort()
      )
      for (const a of kept) expect(sh(a.path, "status", "--porcelain")).toBe("")
      yield* wt.cleanup()
      expect(worktreePaths(repo)).toHaveLength(1)
    })
  )

  it.live("a held ref lock is waited out and retried", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const lockFile = path.join(repo, ".git", "refs", "heads", "muse", "s1", "w1.lock")
      write(lockFile, "")
      const fiber = yield* Effect.fork(wt.allocate({ agent: "w1" }))
      yield* Effect.sleep("400 millis")
      fs.rmSync(lockFile)
      const a = yield* Fiber.join(fiber)
      expect(read(path.join(a.path, "a.txt"))).toContain("two")
    })
  )

  it.live("names are validated; a branch a killed run left is taken back, not refused", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      for (const agent of ["../x", "a b", "", "x.lock", "-x", "a/b"]) {
        const e = yield* Effect.flip(wt.allocate({ agent }))
        expect(e._tag).toBe("InvalidName")
      }
      const bad = yield* Effect.flip(Worktrees.make({ repo, sessionId: "s/../1" }))
      expect(bad._tag).toBe("InvalidName")
      sh(repo, "branch", "muse/s1/taken")
      const taken = yield* wt.allocate({ agent: "taken" })
      expect(taken.branch).toBe("muse/s1/taken")
      expect(taken.base).toBe(sh(repo, "rev-parse", "HEAD"))
      expect(sh(taken.path, "rev-parse", "--abbrev-ref", "HEAD")).toBe("muse/s1/taken")
      expect(worktreePaths(repo)).toHaveLength(2)
      // and allocating it again is the same worktree
      expect(yield* wt.allocate({ agent: "taken" })).toEqual(taken)
    })
  )

  it.live("a configurable root and base ref", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const first = sh(repo, "rev-parse", "HEAD")
      write(path.join(repo, "later.txt"), "later\n")
      commitAll(repo, "later")
      const root = path.join(path.dirname(repo), "elsewhere")
      const wt = yield* Worktrees.make({ repo, sessionId: "s2", root, baseRef: "HEAD~1" })
      const a = yield* wt.allocate({ agent: "w" })
      expect(a.base).toBe(first)
      expect(a.path).toBe(path.join(root, "s2", "w"))
      expect(fs.existsSync(path.join(a.path, "later.txt"))).toBe(false)
      const e = yield* Effect.flip(Worktrees.make({ repo, sessionId: "s3", baseRef: "no-such-ref" }))
      expect(e._tag).toBe("BaseNotFound")
      const notRepo = yield* Effect.flip(Worktrees.make({ repo: path.dirname(repo), sessionId: "s3" }))
      expect(notRepo._tag).toBe("NotARepository")
    })
  )

  it.live("sparse allocation checks out only the named paths", () =>
    Effect.gen(function* () {
      const repo = makeRepo({
        "README.md": "r\n",
        "src/a/one.ts": "1\n",
        "src/a/two.ts": "2\n",
        "src/b/three.ts": "3\n",
        "docs/guide.md": "g\n"
      })
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const a = yield* wt.allocate({ agent: "w", paths: ["/src/a/"] })
      expect(a.paths).toEqual(["/src/a/"])
      expect(fs.existsSync(path.join(a.path, "src/a/one.ts"))).toBe(true)
      expect(fs.existsSync(path.join(a.path, "src/b/three.ts"))).toBe(false)
      expect(fs.existsSync(path.join(a.path, "README.md"))).toBe(false)
      expect(sh(a.path, "status", "--porcelain")).toBe("")
      write(path.join(a.path, "src/a/one.ts"), "1 changed\n")
      const c = yield* wt.commit("w", "change one")
      expect(Option.isSome(c)).toBe(true)
      // files outside the sparse set are untouched by the commit
      expect(sh(repo, "ls-tree", "-r", "--name-only", a.branch).split("\n")).toHaveLength(5)
      const d = yield* wt.diff("w")
      expect(d).toContain("+1 changed")
      expect(d).not.toContain("three.ts")
      // a file the agent creates outside its sparse paths is committed too
      write(path.join(a.path, "docs/new.md"), "new\n")
      expect(Option.isSome(yield* wt.commit("w", "outside the sparse set"))).toBe(true)
      expect(sh(repo, "show", "--name-status", "--format=", a.branch)).toBe("A\tdocs/new.md")
      // the main checkout is not affected by the worktree's sparse configuration
      expect(fs.existsSync(path.join(repo, "src/b/three.ts"))).toBe(true)
      expect(sh(repo, "status", "--porcelain")).toBe("")
    })
  )
})

describe("Worktrees isolation, commit and diff", () => {
  it.live("a worker's writes are invisible in the main checkout and other worktrees until merged", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const [w1, w2] = yield* Effect.forEach(["w1", "w2"], (agent) => wt.allocate({ agent }), {
        concurrency: "unbounded"
      })
      write(path.join(w1!.path, "new.txt"), "from w1\n")
      write(path.join(w1!.path, "a.txt"), "one\nTWO\nthree\n")
      expect(inMain(repo, "new.txt")).toBe(false)
      expect(fs.existsSync(path.join(w2!.path, "new.txt"))).toBe(false)
      expect(read(path.join(repo, "a.txt"))).toBe("one\ntwo\nthree\n")
      expect(read(path.join(w2!.path, "a.txt"))).toBe("one\ntwo\nthree\n")
      expect(sh(repo, "status", "--porcelain")).toBe("")
      yield* wt.commit("w1", "w1 work")
      expect(inMain(repo, "new.txt")).toBe(false)
      expect(fs.existsSync(path.join(w2!.path, "new.txt"))).toBe(false)
      const r = yield* wt.merge("w1")
      expect(r._tag).toBe("Merged")
      expect(read(path.join(repo, "new.txt"))).toBe("from w1\n")
      expect(read(path.join(repo, "a.txt"))).toBe("one\nTWO\nthree\n")
      expect(fs.existsSync(path.join(w2!.path, "new.txt"))).toBe(false)
    })
  )

  it.live("commit records everything as muse <agent>, none when nothing changed", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const a = yield* wt.allocate({ agent: "w1" })
      expect(yield* wt.commit("w1", "nothing")).toEqual(Option.none())
      write(path.join(a.path, "n/new.txt"), "new\n")
      fs.rmSync(path.join(a.path, "README.md"))
      write(path.join(a.path, "a.txt"), "changed\n")
      const c = yield* wt.commit("w1", "agent work")
      expect(Option.getOrThrow(c)).toBe(sh(a.path, "rev-parse", "HEAD"))
      expect(sh(repo, "log", "-1", "--format=%an <%ae>|%s", a.branch)).toBe("muse <w1>|agent work")
      expect(sh(repo, "show", "--name-status", "--format=", a.branch).split("\n").sort()).toEqual([
        "A\tn/new.txt",
        "D\tREADME.md",
        "M\ta.txt"
      ])
      expect(sh(a.path, "status", "--porcelain")).toBe("")
      expect(yield* wt.commit("w1", "again")).toEqual(Option.none())
      const unknown = yield* Effect.flip(wt.commit("nobody", "x"))
      expect(unknown._tag).toBe("UnknownAgent")
    })
  )

  it.live("diff covers commits, uncommitted edits and untracked files, without touching the index", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const a = yield* wt.allocate({ agent: "w1" })
      write(path.join(a.path, "committed.txt"), "c\n")
      yield* wt.commit("w1", "first")
      write(path.join(a.path, "a.txt"), "one\n2\nthree\n")
      write(path.join(a.path, "untracked.txt"), "u\n")
      const statusBefore = sh(a.path, "status", "--porcelain")
      const d = yield* wt.diff("w1")
      expect(d).toContain("diff --git a/committed.txt b/committed.txt")
      expect(d).toContain("+c")
      expect(d).toContain("-two\n+2")
      expect(d).toContain("diff --git a/untracked.txt b/untracked.txt")
      expect(sh(a.path, "status", "--porcelain")).toBe(statusBefore)
      expect(statusBefore).toContain("?? untracked.txt")
    })
  )

  it.live("tools rooted in a worktree cannot reach out of it", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const [w1, w2] = yield* Effect.forEach(["w1", "w2"], (agent) => wt.allocate({ agent }))
      fs.symlinkSync(repo, path.join(w1!.path, "main-link"))
      for (const p of ["../w2/a.txt", w2!.path, path.join(repo, "a.txt"), "main-link/a.txt", "src/../../w2"]) {
        const e = yield* Effect.flip(Paths.resolveInside(w1!.path, p))
        expect(e._tag).toBe("PathEscape")
      }
      expect(yield* Paths.resolveInside(w1!.path, "src/x.ts")).toBe(path.join(w1!.path, "src/x.ts"))
    })
  )
})

describe("Worktrees merge", () => {
  const conflicting = Effect.gen(function* () {
    const repo = makeRepo()
    const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
    const a = yield* wt.allocate({ agent: "w1" })
    write(path.join(a.path, "a.txt"), "one\nworker two\nthree\n")
    write(path.join(a.path, "clean.txt"), "no conflict here\n")
    yield* wt.commit("w1", "worker edit")
    write(path.join(repo, "a.txt"), "one\nmain two\nthree\n")
    const head = commitAll(repo, "main edit")
    return { repo, wt, a, head }
  })

  const assertClean = (repo: string, head: string) => {
    expect(sh(repo, "status", "--porcelain")).toBe("")
    expect(code(repo, "rev-parse", "--verify", "-q", "MERGE_HEAD")).not.toBe(0)
    expect(code(repo, "rev-parse", "--verify", "-q", "CHERRY_PICK_HEAD")).not.toBe(0)
    expect(fs.existsSync(path.join(repo, ".git", "sequencer"))).toBe(false)
    expect(sh(repo, "rev-parse", "HEAD")).toBe(head)
  }

  it.live("a clean merge creates a merge commit on the main checkout's branch", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const a = yield* wt.allocate({ agent: "w1" })
      write(path.join(a.path, "feature.txt"), "feature\n")
      yield* wt.commit("w1", "feature")
      write(path.join(repo, "other.txt"), "main moved on\n")
      commitAll(repo, "main work")
      const r = yield* wt.merge("w1", { strategy: "merge" })
      expect(r).toMatchObject({ _tag: "Merged", into: "main", strategy: "merge", changed: true })
      if (r._tag !== "Merged") return
      expect(r.commit).toBe(sh(repo, "rev-parse", "HEAD"))
      expect(sh(repo, "rev-list", "--parents", "-n", "1", "HEAD").split(" ")).toHaveLength(3)
      expect(sh(repo, "log", "-1", "--format=%s")).toContain("muse/s1/w1")
      expect(read(path.join(repo, "feature.txt"))).toBe("feature\n")
      expect(sh(repo, "status", "--porcelain")).toBe("")
      // merging again has nothing to do
      const again = yield* wt.merge("w1")
      expect(again).toMatchObject({ _tag: "Merged", changed: false, commit: r.commit })
    })
  )

  it.live("a clean cherry-pick replays the worker's commits linearly", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const a = yield* wt.allocate({ agent: "w1" })
      write(path.join(a.path, "one.txt"), "1\n")
      yield* wt.commit("w1", "first")
      write(path.join(a.path, "two.txt"), "2\n")
      yield* wt.commit("w1", "second")
      const r = yield* wt.merge("w1", { strategy: "cherry-pick" })
      expect(r).toMatchObject({ _tag: "Merged", strategy: "cherry-pick", changed: true })
      expect(sh(repo, "log", "--format=%s", "-3").split("\n")).toEqual(["second", "first", "initial"])
      expect(sh(repo, "log", "-1", "--format=%b")).toContain("cherry picked from commit")
      expect(sh(repo, "rev-list", "--parents", "-n", "1", "HEAD").split(" ")).toHaveLength(2)
      // already picked commits are not picked twice
      write(path.join(a.path, "three.txt"), "3\n")
      yield* wt.commit("w1", "third")
      yield* wt.merge("w1", { strategy: "cherry-pick" })
      expect(sh(repo, "log", "--format=%s", "-4").split("\n")).toEqual(["third", "second", "first", "initial"])
    })
  )

  it.live("a conflicting merge is reported with files and hunks, and aborted", () =>
    Effect.gen(function* () {
      const { repo, wt, head } = yield* conflicting
      const r = yield* wt.merge("w1", { strategy: "merge" })
      expect(r._tag).toBe("Conflict")
      if (r._tag !== "Conflict") return
      expect(r.files).toEqual(["a.txt"])
      expect(r.hunks).toEqual([{ file: "a.txt", line: 2, ours: "main two\n", theirs: "worker two\n", base: "two\n" }])
      assertClean(repo, head)
      expect(fs.existsSync(path.join(repo, "clean.txt"))).toBe(false)
      expect(read(path.join(repo, "a.txt"))).toBe("one\nmain two\nthree\n")
    })
  )

  it.live("a conflicting cherry-pick rolls back the commits already picked", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const a = yield* wt.allocate({ agent: "w1" })
      write(path.join(a.path, "fine.txt"), "fine\n")
      yield* wt.commit("w1", "fine")
      write(path.join(a.path, "a.txt"), "one\nworker two\nthree\n")
      yield* wt.commit("w1", "conflicting")
      write(path.join(repo, "a.txt"), "one\nmain two\nthree\n")
      const head = commitAll(repo, "main edit")
      const r = yield* wt.merge("w1", { strategy: "cherry-pick" })
      expect(r).toMatchObject({ _tag: "Conflict", files: ["a.txt"], strategy: "cherry-pick" })
      if (r._tag === "Conflict") expect(r.hunks[0]).toMatchObject({ ours: "main two\n", theirs: "worker two\n" })
      assertClean(repo, head)
      expect(fs.existsSync(path.join(repo, "fine.txt"))).toBe(false)
    })
  )

  it.live("a modify/delete conflict reports the whole file", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const a = yield* wt.allocate({ agent: "w1" })
      fs.rmSync(path.join(a.path, "a.txt"))
      yield* wt.commit("w1", "delete a")
      write(path.join(repo, "a.txt"), "one\nmain\n")
      const head = commitAll(repo, "edit a")
      const r = yield* wt.merge("w1")
      expect(r).toMatchObject({
        _tag: "Conflict",
        files: ["a.txt"],
        hunks: [{ file: "a.txt", line: 0, ours: "one\nmain\n", theirs: "", base: "one\ntwo\nthree\n" }]
      })
      assertClean(repo, head)
    })
  )

  it.live("refuses a dirty main checkout and a worker with uncommitted work", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const a = yield* wt.allocate({ agent: "w1" })
      write(path.join(a.path, "f.txt"), "f\n")
      const pending = yield* Effect.flip(wt.merge("w1"))
      expect(pending._tag).toBe("UncommittedWork")
      expect(pending.message).toContain("f.txt")
      yield* wt.commit("w1", "f")
      write(path.join(repo, "a.txt"), "local edit\n")
      const dirty = yield* Effect.flip(wt.merge("w1"))
      expect(dirty._tag).toBe("DirtyCheckout")
      if (dirty._tag === "DirtyCheckout") expect(dirty.files).toEqual(["a.txt"])
      expect(dirty.message).toContain("refusing to merge")
      expect(read(path.join(repo, "a.txt"))).toBe("local edit\n")
      expect(fs.existsSync(path.join(repo, "f.txt"))).toBe(false)
    })
  )

  it.live("merges into a session branch that is not checked out, through a temporary worktree", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      sh(repo, "branch", "session/s1")
      const [w1, w2] = yield* Effect.forEach(["w1", "w2"], (agent) => wt.allocate({ agent }))
      write(path.join(w1!.path, "one.txt"), "1\n")
      write(path.join(w2!.path, "two.txt"), "2\n")
      yield* wt.commit("w1", "one")
      yield* wt.commit("w2", "two")
      const r1 = yield* wt.merge("w1", { into: "session/s1" })
      const r2 = yield* wt.merge("w2", { into: "session/s1", strategy: "cherry-pick" })
      expect(r1._tag).toBe("Merged")
      expect(r2._tag).toBe("Merged")
      expect(sh(repo, "ls-tree", "--name-only", "session/s1").split("\n")).toEqual(
        expect.arrayContaining(["one.txt", "two.txt"])
      )
      expect(fs.existsSync(path.join(repo, "one.txt"))).toBe(false)
      expect(worktreePaths(repo)).toHaveLength(3)
      const missing = yield* Effect.flip(wt.merge("w1", { into: "nope" }))
      expect(missing._tag).toBe("MergeTargetUnavailable")
      const own = yield* Effect.flip(wt.merge("w1", { into: "muse/s1/w2" }))
      expect(own.message).toContain("checked out in the worker worktree")
    })
  )
})

describe("Worktrees release and cleanup", () => {
  it.live("release removes a worktree and its branch, keepBranch keeps the branch", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const [a, b] = yield* Effect.forEach(["a", "b"], (agent) => wt.allocate({ agent }))
      yield* wt.release("a")
      expect(fs.existsSync(a!.path)).toBe(false)
      expect(code(repo, "rev-parse", "--verify", "-q", "refs/heads/muse/s1/a")).not.toBe(0)
      yield* wt.release("b", { keepBranch: true })
      expect(fs.existsSync(b!.path)).toBe(false)
      expect(code(repo, "rev-parse", "--verify", "-q", "refs/heads/muse/s1/b")).toBe(0)
      expect(worktreePaths(repo)).toHaveLength(1)
      expect((yield* Effect.flip(wt.release("a")))._tag).toBe("UnknownAgent")
    })
  )

  it.live("cleanup leaves git worktree list and branches as they were before the session", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      sh(repo, "branch", "feature")
      const userWt = path.join(path.dirname(repo), "user-wt")
      sh(repo, "worktree", "add", "-q", userWt, "feature")
      // HEAD of the main checkout moves with the merge below; everything else must come back
      const list = () =>
        sh(repo, "worktree", "list", "--porcelain")
          .split("\n")
          .filter((l) => !l.startsWith("HEAD "))
          .join("\n")
      const before = { list: list(), branches: branches(repo) }
      const configBefore = sh(repo, "config", "--local", "--list")
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      yield* Effect.forEach(agents(6), (agent) => wt.allocate({ agent }), { concurrency: "unbounded" })
      yield* wt.allocate({ agent: "sparse", paths: ["/src/"] })
      write(path.join(repo, "..", ".muse-worktrees", "repo", "s1", "worker-1", "w.txt"), "w\n")
      yield* wt.commit("worker-1", "w")
      yield* wt.merge("worker-1")
      yield* wt.release("worker-2", { keepBranch: true })
      const mergedHead = sh(repo, "rev-parse", "HEAD")
      yield* wt.cleanup()
      expect(list()).toBe(before.list)
      expect(branches(repo)).toBe(before.branches)
      expect(sh(repo, "config", "--local", "--list")).toBe(configBefore)
      expect(fs.existsSync(path.join(path.dirname(repo), ".muse-worktrees"))).toBe(false)
      expect(fs.existsSync(userWt)).toBe(true)
      expect(sh(repo, "rev-parse", "HEAD")).toBe(mergedHead)
      expect(yield* wt.list).toEqual([])
    })
  )

  it.live("the layer cleans up on close when asked to", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      const before = branches(repo)
      yield* Effect.gen(function* () {
        const wt = yield* Worktrees.Worktrees
        yield* Effect.forEach(agents(3), (agent) => wt.allocate({ agent }), { concurrency: "unbounded" })
        expect(worktreePaths(repo)).toHaveLength(4)
      }).pipe(Effect.provide(Worktrees.layer({ repo, sessionId: "s1", cleanupOnClose: true })))
      expect(worktreePaths(repo)).toHaveLength(1)
      expect(branches(repo)).toBe(before)
      yield* Effect.gen(function* () {
        yield* (yield* Worktrees.Worktrees).allocate({ agent: "kept" })
      }).pipe(Effect.provide(Worktrees.layer({ repo, sessionId: "s2" })))
      expect(worktreePaths(repo)).toHaveLength(2)
    })
  )
})

describe("Worktrees dirty main checkout", () => {
  const dirtyRepo = () => {
    const repo = makeRepo()
    write(path.join(repo, "a.txt"), "one\nlocal two\nthree\n")
    write(path.join(repo, "staged.txt"), "staged\n")
    sh(repo, "add", "staged.txt")
    write(path.join(repo, "notes/untracked.md"), "untracked\n")
    fs.rmSync(path.join(repo, "README.md"))
    write(path.join(repo, ".gitignore"), "*.log\n")
    write(path.join(repo, "debug.log"), "ignored\n")
    return repo
  }

  it.live("ignore (default): workers start from the base commit only", () =>
    Effect.gen(function* () {
      const repo = dirtyRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      expect(wt.dirty).toBe("ignore")
      const a = yield* wt.allocate({ agent: "w" })
      expect(read(path.join(a.path, "a.txt"))).toBe("one\ntwo\nthree\n")
      expect(fs.existsSync(path.join(a.path, "staged.txt"))).toBe(false)
      expect(fs.existsSync(path.join(a.path, "notes/untracked.md"))).toBe(false)
      expect(fs.existsSync(path.join(a.path, "README.md"))).toBe(true)
      expect(read(path.join(repo, "a.txt"))).toBe("one\nlocal two\nthree\n")
    })
  )

  it.live("refuse: allocation fails naming the dirty files", () =>
    Effect.gen(function* () {
      const repo = dirtyRepo()
      const wt = yield* Worktrees.make({ repo, sessionId: "s1", dirty: "refuse" })
      const e = yield* Effect.flip(wt.allocate({ agent: "w" }))
      expect(e._tag).toBe("DirtyCheckout")
      if (e._tag !== "DirtyCheckout") return
      expect([...e.files].sort()).toEqual([".gitignore", "README.md", "a.txt", "notes/", "staged.txt"])
      expect(e.message).toContain('dirty policy is "refuse"')
      expect(worktreePaths(repo)).toHaveLength(1)
      sh(repo, "stash", "-u", "-q")
      fs.rmSync(path.join(repo, "debug.log"))
      expect((yield* wt.allocate({ agent: "w" })).agent).toBe("w")
    })
  )

  it.live("carry: uncommitted changes and untracked files are applied into each new worktree", () =>
    Effect.gen(function* () {
      const repo = dirtyRepo()
      const statusBefore = sh(repo, "status", "--porcelain")
      const wt = yield* Worktrees.make({ repo, sessionId: "s1", dirty: "carry" })
      const [a, b] = yield* Effect.forEach(["w1", "w2"], (agent) => wt.allocate({ agent }), {
        concurrency: "unbounded"
      })
      const sparse = yield* wt.allocate({ agent: "w3", paths: ["/src/"] })
      for (const w of [a!, b!, sparse]) {
        expect(read(path.join(w.path, "a.txt"))).toBe("one\nlocal two\nthree\n")
        expect(read(path.join(w.path, "staged.txt"))).toBe("staged\n")
        expect(read(path.join(w.path, "notes/untracked.md"))).toBe("untracked\n")
        expect(fs.existsSync(path.join(w.path, "README.md"))).toBe(false)
        expect(fs.existsSync(path.join(w.path, "debug.log"))).toBe(false)
        expect(sh(repo, "rev-parse", w.branch)).toBe(wt.base)
      }
      expect(fs.existsSync(path.join(sparse.path, "src/x.ts"))).toBe(true)
      expect(sh(repo, "status", "--porcelain")).toBe(statusBefore)
      // the carried changes become part of the worker's work when it commits
      yield* wt.commit("w1", "with carried changes")
      expect(sh(repo, "show", "--name-status", "--format=", "muse/s1/w1").split("\n").sort()).toEqual([
        "A\t.gitignore",
        "A\tnotes/untracked.md",
        "A\tstaged.txt",
        "D\tREADME.md",
        "M\ta.txt"
      ])
    })
  )

  it.live("carry fails cleanly when the changes do not apply to the base", () =>
    Effect.gen(function* () {
      const repo = makeRepo()
      write(path.join(repo, "a.txt"), "rewritten\n")
      commitAll(repo, "rewrite")
      write(path.join(repo, "a.txt"), "rewritten again\n")
      const wt = yield* Worktrees.make({ repo, sessionId: "s1", dirty: "carry", baseRef: "HEAD~1" })
      const e = yield* Effect.flip(wt.allocate({ agent: "w" }))
      expect(e._tag).toBe("CarryFailed")
      expect(worktreePaths(repo)).toHaveLength(1)
      expect(code(repo, "rev-parse", "--verify", "-q", "refs/heads/muse/s1/w")).not.toBe(0)
    })
  )
})
