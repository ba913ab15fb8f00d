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
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Run, readEvents } from "../../../packages/node/test/support/chaos.js"
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
 * then it stops (`before`: without running it; `after`: once it ran), creates `MUSE_TEST_PAUSED`,
 * (holding the directory git ran in), and waits to be killed. `MUSE_TEST_SLOW_ON` makes matching
 * commands take a second longer.
 */
const wrapperDir = () => {
  const dir = tmpDir("muse-git-wrapper-")
  fs.writeFileSync(
    path.join(dir, "git"),
    `#!/bin/sh
case " $* " in
  *"$MUSE_TEST_SLOW_ON"*) [ -n "$MUSE_TEST_SLOW_ON" ] && sleep 1 ;;
esac
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
    expect(after.some((e) => e.type === "worktree.failed" || e.type === "crew.member.failed")).toBe(false)
    const note = after.find((e) => e.type === "worktree.reattached")
    expect((note?.data as any).worktrees).toContainEqual(expect.objectContaining({ agent, status: "recreated" }))
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
