/**
 * The crew in worktrees killed at exact moments: git is reached through a wrapper on `PATH` that
 * stops at a chosen command (before it runs, or after it finished) and says so, and the test then
 * kills the session's whole process group there. Each resumed session must end as an
 * uninterrupted one does (see `problemsOf`).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Event } from "@musekit/core"
import { SessionRuntime } from "@musekit/node"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Run, readEvents } from "../../../packages/node/test/support/chaos.js"
import { WorktreePlugin } from "../src/index.js"
import {
  type CrewRun,
  cleanupCrew,
  mergesOf,
  newCrewRun,
  prepareCrew,
  problemsOf,
  startCrew,
  worktreeDir
} from "./crew.js"
import { sh, tmpDir } from "./helpers.js"

const realGit = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim()

/**
 * A `git` that runs the real one, except the first time its arguments contain `MUSE_TEST_PAUSE_ON`:
 * then it stops (`before`: without running it; `after`: once it ran), creates `MUSE_TEST_PAUSED`
 * (holding the directory git ran in), and waits to be killed. `MUSE_TEST_SLOW_ON` makes matching
 * commands take a second longer; `git worktree add` of a path containing `MUSE_TEST_FAIL_ADD`
 * fails, as git does when it cannot create the worktree.
 */
const wrapperDir = () => {
  const dir = tmpDir("muse-git-wrapper-")
  fs.writeFileSync(
    path.join(dir, "git"),
    `#!/bin/sh
case " $* " in
  *"$MUSE_TEST_SLOW_ON"*) [ -n "$MUSE_TEST_SLOW_ON" ] && sleep 1 ;;
esac
if [ -n "$MUSE_TEST_FAIL_ADD" ]; then
  case " $* " in
    *" worktree add "*"$MUSE_TEST_FAIL_ADD"*)
      echo "fatal: could not create leading directories of '$MUSE_TEST_FAIL_ADD': No space left on device" >&2
      exit 128 ;;
  esac
fi
if [ -n "$MUSE_TEST_PAUSE_ON" ] && [ ! -e "$MUSE_TEST_PAUSED" ]; then
  case " $* " in
    *"$MUSE_TEST_PAUSE_ON"*)
      if [ "$MUSE_TEST_PAUSE_WHEN" = after ]; then "${realGit}" "$@"; fi
      pwd > "$MUSE_TEST_PAUSED"
      exec sleep 1000 ;;
  esac
fi
exec "${realGit}" "$@"
`,
    { mode: 0o755 }
  )
  return dir
}

const wrapper = { dir: "" }

beforeAll(async () => {
  await prepareCrew()
  wrapper.dir = wrapperDir()
}, 120_000)
afterAll(cleanupCrew)

/** Run the session until git reaches `on` (`when` it ran or not), then kill its process group there. */
const killAt = async (r: CrewRun, on: string, when: "before" | "after") => {
  const paused = path.join(tmpDir("muse-paused-"), "paused")
  const run = startCrew(r, {
    PATH: `${wrapper.dir}${path.delimiter}${process.env.PATH}`,
    MUSE_TEST_PAUSE_ON: on,
    MUSE_TEST_PAUSE_WHEN: when,
    MUSE_TEST_PAUSED: paused
  })
  const reached = await Promise.race([
    new Promise<boolean>((resolve) => {
      const t = setInterval(() => {
        if (fs.existsSync(paused)) {
          clearInterval(t)
          resolve(true)
        }
      }, 5)
      run.exit.then(() => {
        clearInterval(t)
        resolve(fs.existsSync(paused))
      })
    })
  ])
  expect(reached, `git never reached "${on}": ${run.stderr()}`).toBe(true)
  run.kill()
  expect((await run.exit).signal).toBe("SIGKILL")
  return { events: await readEvents(r.state, r.session), cwd: fs.readFileSync(paused, "utf8").trim() }
}

/** Resume until done (no more kills); the run that finished. */
const finish = async (r: CrewRun, env?: NodeJS.ProcessEnv): Promise<Run> => {
  const run = startCrew(r, env)
  const exit = await run.exit
  expect(exit.code, run.stderr()).toBe(0)
  return run
}

/** Events a replay of the session matched (`replay --verify`, without git). */
const replayed = async (r: CrewRun) =>
  (
    await Effect.runPromise(
      SessionRuntime.replay({
        session: r.session,
        dir: r.state,
        verify: true,
        plugins: [WorktreePlugin.make({ repo: r.repo, sessionId: r.session, replaying: true })]
      })
    )
  ).matched

/** What reached the main agent from the crew (at a turn boundary, or between the steps of a turn). */
const toMain = (events: ReadonlyArray<Event.Envelope>) =>
  events
    .filter((e) => e.agent === "main" && (e.type === "crew.reports" || e.type === "inbox.delivered"))
    .map((e) => (e.data as { text: string }).text)

const inFlight = (events: ReadonlyArray<Event.Envelope>, type: string, agent: string) => {
  const intent = [...events].reverse().find((e) => e.type === type && e.agent === agent)
  return intent !== undefined && !events.some((e) => e.parent === intent.id)
}

describe("a crew in worktrees killed at exact moments", () => {
  it("between worktree.allocating and its outcome: the half-made worktree is finished, never the main checkout", async () => {
    const r = newCrewRun("alloc")
    // `git worktree add --no-checkout` ran; the checkout of the files did not
    const { events, cwd } = await killAt(r, "reset --hard", "before")
    const agent = path.basename(cwd)
    expect(inFlight(events, "worktree.allocating", agent)).toBe(true)
    expect(fs.readdirSync(path.join(worktreeDir(r), agent))).toEqual([".git"])

    await finish(r)
    const after = await readEvents(r.state, r.session)
    const allocated = after.filter((e) => e.type === "worktree.allocated" && e.agent === agent)
    expect(allocated).toHaveLength(1)
    expect(
      after.filter((e) => e.type === "worktree.failed" || e.type === "crew.member.failed"),
      JSON.stringify(
        after
          .filter((e) => e.type.startsWith("worktree") || e.type === "crew.member.failed")
          .map((e) => [e.agent, e.type, e.data])
      )
    ).toEqual([])
    const note = after.find((e) => e.type === "worktree.reattached")
    expect((note?.data as any)?.worktrees).toContainEqual(expect.objectContaining({ agent, status: "recreated" }))
    expect(await problemsOf(r)).toEqual([])
  })

  it("between git add and git commit: the staged work is committed and merged once", async () => {
    const r = newCrewRun("staged")
    const { events } = await killAt(r, "commit --no-verify", "before")
    expect(inFlight(events, "tool.started", "main")).toBe(true)
    const merging = ([...events].reverse().find((e) => e.type === "tool.started" && e.agent === "main")!.data as any)
      .params.agent as string
    const staged = sh(path.join(worktreeDir(r), merging), "diff", "--cached", "--name-only")
    expect(staged.split("\n").sort()).toEqual([`${merging}/a.txt`, `${merging}/b.txt`])

    await finish(r)
    const merge = mergesOf(await readEvents(r.state, r.session)).find((e) => (e.data as any).result.agent === merging)
    expect((merge!.data as any).settled).toBe("rerun")
    expect(await problemsOf(r)).toEqual([])
  })

  it("after the merge commit, before its outcome: recorded as done with the commit git has, not merged again", async () => {
    const r = newCrewRun("landed")
    const { events } = await killAt(r, "merge --no-ff", "after")
    expect(inFlight(events, "tool.started", "main")).toBe(true)
    const merging = ([...events].reverse().find((e) => e.type === "tool.started" && e.agent === "main")!.data as any)
      .params.agent as string
    const head = sh(r.repo, "rev-parse", "main")
    expect(sh(r.repo, "log", "-1", "--format=%s", "main")).toBe(`parts of ${merging}`)

    await finish(r)
    const merge = mergesOf(await readEvents(r.state, r.session)).find((e) => (e.data as any).result.agent === merging)
    expect(merge!.data).toMatchObject({
      settled: "done",
      isFailure: false,
      result: { _tag: "Merged", commit: head, changed: true }
    })
    expect(await problemsOf(r)).toEqual([])
  })

  it("a worktree that cannot be made: the member fails visibly and never writes into the checkout", async () => {
    const r = newCrewRun("nospace")
    await finish(r, { PATH: `${wrapper.dir}${path.delimiter}${process.env.PATH}`, MUSE_TEST_FAIL_ADD: "/worker-2" })
    const events = await readEvents(r.state, r.session)
    expect(events.find((e) => e.type === "worktree.failed")).toMatchObject({ agent: "worker-2" })
    const failed = events.find((e) => e.type === "crew.member.failed")
    expect(failed).toMatchObject({ agent: "worker-2" })
    expect((failed!.data as { error: string }).error).toContain("its git worktree could not be made")
    expect((failed!.data as { error: string }).error).toContain("No space left on device")
    // the main agent was told
    const told = toMain(events)
    expect(told.join("\n")).toMatch(/\[blocking\] worker-2: failed: .*could not be made/)
    // nothing of worker-2 anywhere in the checkout; the others merged
    expect(events.some((e) => e.agent === "worker-2" && e.type === "tool.started")).toBe(false)
    expect(fs.existsSync(path.join(r.repo, "worker-2"))).toBe(false)
    expect(sh(r.repo, "status", "--porcelain")).toBe("")
    expect(sh(r.repo, "show", "main:worker-1/a.txt")).toBe("a.txt of worker-1")
    expect(sh(r.repo, "show", "main:worker-3/b.txt")).toBe("b.txt of worker-3")
    expect(await replayed(r)).toBe(events.length)
  })

  it("a worktree that cannot be brought back after a kill: recorded, the member fails once live, nothing lands in the checkout", async () => {
    const r = newCrewRun("lost")
    // the agents think slowly: kill once all three worktrees are made
    const run = startCrew(r, { MUSE_TEST_MODEL_DELAY_MS: "400" })
    await new Promise<void>((resolve) => {
      const t = setInterval(() => {
        if (run.acks.filter((a) => a.type === "worktree.allocated").length === 3) {
          clearInterval(t)
          run.kill()
          resolve()
        }
      }, 1)
      run.exit.then(() => {
        clearInterval(t)
        resolve()
      })
    })
    expect((await run.exit).signal).toBe("SIGKILL")
    const before = await readEvents(r.state, r.session)
    // worker-2's worktree is gone (with whatever it wrote), and git cannot make it again
    fs.rmSync(path.join(worktreeDir(r), "worker-2"), { recursive: true, force: true })
    await finish(r, { PATH: `${wrapper.dir}${path.delimiter}${process.env.PATH}`, MUSE_TEST_FAIL_ADD: "/worker-2" })

    const events = await readEvents(r.state, r.session)
    const note = events.find((e) => e.type === "worktree.reattached")
    expect(note?.agent).toBe("worktree")
    expect((note!.data as any).worktrees).toContainEqual(
      expect.objectContaining({ agent: "worker-2", status: "failed", error: expect.stringContaining("No space left") })
    )
    const failed = events.find((e) => e.type === "crew.member.failed")
    expect(failed).toMatchObject({ agent: "worker-2" })
    expect((failed!.data as { error: string }).error).toContain("could not be given back after the restart")
    // a turn it was in when killed goes on, but every path is refused to it
    for (const done of events.slice(before.length)) {
      if (done.agent !== "worker-2" || done.type !== "tool.completed") continue
      expect(done.data).toMatchObject({ isFailure: true })
      expect(JSON.stringify(done.data)).toContain("the worktree is unavailable")
    }
    const told = toMain(events)
    expect(told.join("\n")).toContain("[blocking] worker-2: failed")
    expect(fs.existsSync(path.join(r.repo, "worker-2"))).toBe(false)
    expect(sh(r.repo, "status", "--porcelain")).toBe("")
    expect(sh(r.repo, "show", "main:worker-1/a.txt")).toBe("a.txt of worker-1")
    // the log replays exactly, the failure included
    expect(await replayed(r)).toBe(events.length)
  })

  it("a merge issued in the first milliseconds after resume finds every worktree back", async () => {
    const r = newCrewRun("early")
    // kill while main's model call after the first crew report is in flight (it answers with a merge)
    const run = startCrew(r, { MUSE_TEST_MODEL_DELAY_MS: "2" })
    await new Promise<void>((resolve) => {
      const t = setInterval(() => {
        const reports = run.acks.findIndex((a) => a.type === "crew.reports")
        if (reports >= 0 && run.acks.slice(reports).some((a) => a.type === "model.requested")) {
          clearInterval(t)
          run.kill()
          resolve()
        }
      }, 1)
      run.exit.then(() => {
        clearInterval(t)
        resolve()
      })
    })
    expect((await run.exit).signal).toBe("SIGKILL")
    const before = await readEvents(r.state, r.session)
    expect(mergesOf(before)).toHaveLength(0)
    // every worktree is slow to come back (its git calls take a second longer), the model is fast
    const resumed = await finish(r, {
      PATH: `${wrapper.dir}${path.delimiter}${process.env.PATH}`,
      MUSE_TEST_SLOW_ON: "worktree list"
    })
    expect(resumed.stderr()).not.toContain("has no worktree")
    const after = await readEvents(r.state, r.session)
    const live = after.slice(before.length)
    // the first merge succeeded: the worktrees were back before anything went on live
    const first = mergesOf(live)[0]!
    expect(first.data).toMatchObject({ isFailure: false, result: { _tag: "Merged", changed: true } })
    expect(await problemsOf(r)).toEqual([])
  })
})
