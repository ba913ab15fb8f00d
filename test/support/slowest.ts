/**
 * A Vitest reporter that prints the ten slowest test files at the end of a run (wall time from
 * collection to the last hook), so the suite's cost stays in sight; `MUSE_TEST_TIMINGS=<file>`
 * also writes every file's figure there as JSON.
 *
 * @example
 * ```ts
 * // vitest.config.ts
 * reporters: ["default", "./test/support/slowest.ts"]
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Reporter, TestModule } from "vitest/node"

export default class Slowest implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const rows = modules
      .map((m) => {
        const d = m.diagnostic()
        return {
          file: path.relative(process.cwd(), m.moduleId),
          ms: Math.round(d.collectDuration + d.setupDuration + d.duration),
          state: m.state()
        }
      })
      .sort((a, b) => b.ms - a.ms)
    if (process.env.MUSE_TEST_TIMINGS) fs.writeFileSync(process.env.MUSE_TEST_TIMINGS, JSON.stringify(rows, null, 1))
    if (rows.length < 2) return
    const total = rows.reduce((n, r) => n + r.ms, 0)
    const lines = rows.slice(0, 10).map((r) => `${(r.ms / 1000).toFixed(1).padStart(7)} s  ${r.file}`)
    process.stdout.write(
      `\n slowest test files (of ${rows.length}, ${(total / 1000).toFixed(0)} s in all):\n${lines.join("\n")}\n`
    )
  }
}
