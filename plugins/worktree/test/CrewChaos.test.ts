/**
 * A crew in git worktrees under `kill -9`: many scripted sessions (main delegates to three writing
 * workers, a reviewer approves each change, main merges each worker, then answers DONE), each
 * killed with its whole process group (git included) 1–3 times at random moments and resumed
 * until it is done. Every session must end where an uninterrupted one does: each worker's files
 * merged exactly once, a clean checkout, no half-made or leftover worktree, every recorded merge
 * as git has it, and a log that replays exactly.
 *
 * Sessions run a few at a time; `MUSE_CREW_CHAOS_SESSIONS` sets how many (default 50).
 */
import * as os from "node:os"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { killLoop, readEvents } from "../../../packages/node/test/support/chaos.js"
import { cleanupCrew, mergesOf, newCrewRun, prepareCrew, problemsOf, startCrew } from "./crew.js"

const SESSIONS = Number(process.env.MUSE_CREW_CHAOS_SESSIONS ?? 50)
const CONCURRENCY = Math.max(2, Math.min(4, os.availableParallelism() * 2))

beforeAll(prepareCrew, 120_000)
afterAll(cleanupCrew)

describe("a crew in git worktrees under kill -9", () => {
  it(`${SESSIONS} sessions killed 1–3 times each end as an uninterrupted one does`, async () => {
    const results: Array<{
      session: string
      kills: number
      runs: number
      phases: Map<string, number>
      problems: Array<string>
      settled: Array<string>
    }> = []
    let next = 0
    const one = async () => {
      while (next < SESSIONS) {
        const n = next++
        const r = newCrewRun(`chaos${n}`)
        const kills = 1 + Math.floor(Math.random() * 3)
        const loop = await killLoop({
          start: () => startCrew(r),
          state: r.state,
          session: r.session,
          kills,
          // anywhere in a session (about 140 events), a few milliseconds after the event; the first
          // kill's event is early enough (by seq 110) that the kill lands before the end on a busy machine
          progress: (before) => Math.max(4, 110 - before),
          delayMs: 25,
          maxRuns: 20
        }).catch((e: Error) => {
          throw new Error(`session ${r.session}: ${e.message}`)
        })
        const events = await readEvents(r.state, r.session)
        const problems = await problemsOf(r)
        results.push({
          session: r.session,
          kills: loop.kills,
          runs: loop.runs,
          phases: loop.phases,
          problems,
          settled: mergesOf(events).flatMap((e) => {
            const s = (e.data as { settled?: string }).settled
            return s ? [s] : []
          })
        })
      }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, one))

    const failed = results.filter((r) => r.problems.length > 0)
    const phases = new Map<string, number>()
    for (const r of results) for (const [k, v] of r.phases) phases.set(k, (phases.get(k) ?? 0) + v)
    const kills = results.reduce((n, r) => n + r.kills, 0)
    const settled = results.flatMap((r) => r.settled)
    process.stdout.write(
      `crew chaos: ${results.length} sessions, ${kills} kills, ${settled.length} merges settled after a kill (${settled.join(" ")}); last event at a kill: ${JSON.stringify(Object.fromEntries(phases))}\n`
    )
    expect(failed.map((r) => `${r.session}: ${r.problems.join("; ")}`)).toEqual([])
    expect(results).toHaveLength(SESSIONS)
    // every session was killed at least once
    expect(results.filter((r) => r.kills === 0)).toEqual([])
  }, 1_800_000)
})
