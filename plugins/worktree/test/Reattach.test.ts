import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Worktrees } from "../src/index.js"
import { branches, code, makeRepo, read, sh, worktreePaths, write } from "./helpers.js"

const monorepo = fileURLToPath(new URL("../../..", import.meta.url))
const fixture = fileURLToPath(new URL("./fixtures/fanout.ts", import.meta.url))

/** A repository big enough that checking out 16 worktrees takes a noticeable time. */
const bigRepo = () => {
  const files: Record<string, string> = {}
  for (let i = 0; i < 600; i++) files[`src/m${i % 30}/f${i}.ts`] = `export const v${i} = ${i}\n`.repeat(20)
  return makeRepo(files)
}

/** Start the fan-out of 16 in a child process and SIGKILL it (and its git children) after the first completion. */
const killMidFanOut = (repo: string, records: string) =>
  Effect.async<{ allocated: Array<string>; signal: string | null }, Error>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", fixture, repo, "crash", "16", records], {
      cwd: monorepo,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
    const allocated: Array<string> = []
    let out = ""
    let err = ""
    let killed = false
    child.stdout.on("data", (b: Buffer) => {
      out += b.toString()
      const lines = out.split("\n")
      out = lines.pop()!
      for (const l of lines) {
        if (l.startsWith("allocated ")) allocated.push(l.slice("allocated ".length))
        if (!killed && allocated.length >= 1) {
          killed = true
          process.kill(-child.pid!, "SIGKILL")
        }
      }
    })
    child.stderr.on("data", (b: Buffer) => (err += b.toString()))
    child.on("close", (exitCode, signal) =>
      killed
        ? resume(Effect.succeed({ allocated: [...allocated], signal }))
        : resume(Effect.fail(new Error(`fan-out ended before it was killed (exit ${exitCode}): ${err}`)))
    )
  })

describe("Worktrees.reattach", () => {
  it.live(
    "after a SIGKILL mid-fan-out, existing worktrees are re-attached and missing ones recreated",
    () =>
      Effect.gen(function* () {
        const repo = bigRepo()
        const branchesBefore = branches(repo)
        const recordsFile = path.join(path.dirname(repo), "records.jsonl")
        const { allocated, signal } = yield* killMidFanOut(repo, recordsFile)
        expect(signal).toBe("SIGKILL")
        const records = read(recordsFile)
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as Worktrees.Allocation)
        expect(records).toHaveLength(16)
        // the crash really interrupted the fan-out
        expect(allocated.length).toBeGreaterThanOrEqual(1)
        expect(allocated.length).toBeLessThan(16)

        const wt = yield* Worktrees.make({ repo, sessionId: "crash", baseRef: records[0]!.base })
        const result = yield* wt.reattach(records)
        expect(result.map((r) => r.agent)).toEqual(records.map((r) => r.agent))
        const attached = result.filter((r) => r.status === "attached").map((r) => r.agent)
        const recreated = result.filter((r) => r.status !== "attached")
        // every worktree the crashed process finished is kept as it was
        for (const agent of allocated) expect(attached).toContain(agent)
        expect(recreated.length).toBeGreaterThan(0)

        expect(worktreePaths(repo)).toHaveLength(17)
        expect(sh(repo, "worktree", "list", "--porcelain")).not.toContain("locked")
        // (on failure: which admin folders there are, and where each points)
        const admins = path.join(repo, ".git", "worktrees")
        const adminInfo = fs.readdirSync(admins).map((name) => {
          const at = (f: string) => (fs.existsSync(path.join(admins, name, f)) ? read(path.join(admins, name, f)) : "-")
          return `${name}: gitdir=${at("gitdir").trim()} locked=${at("locked").trim()}`
        })
        expect(adminInfo, adminInfo.join("\n")).toHaveLength(16)
        for (const r of result) {
          expect(sh(r.path, "rev-parse", "--abbrev-ref", "HEAD")).toBe(r.branch)
          expect(sh(r.path, "status", "--porcelain")).toBe("")
          expect(read(path.join(r.path, "src/m7/f7.ts"))).toContain("export const v7 = 7")
        }
        // the re-attached session works as usual: commit, merge, cleanup
        write(path.join(result[15]!.path, "after-crash.txt"), "ok\n")
        yield* wt.commit(result[15]!.agent, "after the crash")
        expect(yield* wt.merge(result[15]!.agent)).toMatchObject({ _tag: "Merged", changed: true })
        yield* wt.cleanup()
        expect(worktreePaths(repo)).toHaveLength(1)
        expect(branches(repo)).toBe(branchesBefore)
      }),
    240_000
  )

  it.live("keeps intact worktrees, rebuilds vanished ones from their branch or base, refuses foreign paths", () =>
    Effect.gen(function* () {
      const repo = makeRepo({ "a.txt": "a\n", "src/x.ts": "x\n", "docs/d.md": "d\n" })
      const first = yield* Worktrees.make({ repo, sessionId: "s1" })
      const records = yield* Effect.forEach(["intact", "gone-dir", "gone-both", "stray"], (agent) =>
        first.allocate({ agent })
      )
      const sparse = yield* first.allocate({ agent: "sparse", paths: ["/src/"] })
      const [intact, goneDir, goneBoth, stray] = records as [
        Worktrees.Allocation,
        Worktrees.Allocation,
        Worktrees.Allocation,
        Worktrees.Allocation
      ]
      write(path.join(intact.path, "wip.txt"), "uncommitted work\n")
      write(path.join(goneDir.path, "kept.txt"), "committed before the crash\n")
      yield* first.commit("gone-dir", "kept")
      fs.rmSync(goneDir.path, { recursive: true, force: true })
      fs.rmSync(goneBoth.path, { recursive: true, force: true })
      sh(repo, "worktree", "prune")
      sh(repo, "branch", "-D", "-q", goneBoth.branch)
      // a directory that is no longer a registered worktree
      sh(repo, "worktree", "remove", "--force", stray.path)
      write(path.join(stray.path, "junk.txt"), "junk\n")
      fs.rmSync(sparse.path, { recursive: true, force: true })

      // a new process: same session, fresh service
      const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
      const result = yield* wt.reattach([...records, sparse])
      expect(result.map((r) => [r.agent, r.status])).toEqual([
        ["intact", "attached"],
        ["gone-dir", "recreated"],
        ["gone-both", "recreated-from-base"],
        ["stray", "recreated"],
        ["sparse", "recreated"]
      ])
      expect(read(path.join(intact.path, "wip.txt"))).toBe("uncommitted work\n")
      expect(read(path.join(goneDir.path, "kept.txt"))).toBe("committed before the crash\n")
      expect(sh(repo, "rev-parse", goneBoth.branch)).toBe(goneBoth.base)
      expect(fs.existsSync(path.join(stray.path, "junk.txt"))).toBe(false)
      expect(fs.existsSync(path.join(sparse.path, "src/x.ts"))).toBe(true)
      expect(fs.existsSync(path.join(sparse.path, "docs/d.md"))).toBe(false)
      expect((yield* wt.list).map((a) => a.agent).sort()).toEqual([
        "gone-both",
        "gone-dir",
        "intact",
        "sparse",
        "stray"
      ])
      expect(worktreePaths(repo)).toHaveLength(6)

      // reattaching again is a no-op
      const again = yield* wt.reattach([...records, sparse])
      expect(again.every((r) => r.status === "attached")).toBe(true)

      const foreign = { ...intact, path: repo }
      const e = yield* Effect.flip(wt.reattach([foreign]))
      expect(e._tag).toBe("PathEscape")
      expect(fs.existsSync(path.join(repo, "a.txt"))).toBe(true)
      expect(code(repo, "rev-parse", "--verify", "-q", intact.branch)).toBe(0)
    })
  )

  it.live(
    "a worktree whose `git worktree add` was killed half-way is rebuilt in place, leaving no second admin folder",
    () =>
      Effect.gen(function* () {
        const repo = makeRepo({ "a.txt": "a\n" })
        const first = yield* Worktrees.make({ repo, sessionId: "s1" })
        const half = yield* first.allocate({ agent: "half" })
        // what a killed `worktree add` leaves: an admin folder locked while initializing, no checkout
        const admins = path.join(repo, ".git", "worktrees")
        const [admin] = fs.readdirSync(admins)
        fs.writeFileSync(path.join(admins, admin!, "locked"), "initializing")
        fs.rmSync(half.path, { recursive: true, force: true })

        const wt = yield* Worktrees.make({ repo, sessionId: "s1" })
        const [back] = yield* wt.reattach([half])
        expect(back?.status).not.toBe("attached")
        expect(fs.readdirSync(admins)).toHaveLength(1)
        expect(sh(repo, "worktree", "list", "--porcelain")).not.toContain("locked")
        expect(read(path.join(half.path, "a.txt"))).toBe("a\n")
        expect(sh(half.path, "rev-parse", "--abbrev-ref", "HEAD")).toBe(half.branch)
      })
  )
})
