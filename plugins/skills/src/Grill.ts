/**
 * Findings: what `/grill` reports about a plan.
 *
 * A reviewer agent that did not write the plan (its own agent, `grill` by default, with reviewer
 * instructions and read-only tools) attacks it — missing steps, wrong assumptions, untested
 * paths, rollback, risk — and submits its findings through the internal tool `submit_findings`.
 * Each finding has a severity: `blocking` (the plan must not run as it is), `major` or `minor`.
 * The planner revises the plan until no blocking finding is left or the round limit is reached.
 *
 * @example
 * ```ts
 * import { Grill } from "@musekit/plugin-skills"
 *
 * const f: Grill.Finding = {
 *   severity: "blocking", category: "untested-path", step: "s2",
 *   issue: "Nothing runs the migration against a copy of the data", suggestion: "Add a dry-run step"
 * }
 * Grill.blocking([f]).length // 1
 * console.log(Grill.render([f]))
 * ```
 */
import { Schema } from "effect"

export const Severity = Schema.Literal("blocking", "major", "minor")
export type Severity = typeof Severity.Type

export const Category = Schema.Literal("missing-step", "wrong-assumption", "untested-path", "rollback", "risk", "other")
export type Category = typeof Category.Type

export const Finding = Schema.Struct({
  severity: Severity.annotations({
    description: "blocking: the plan must not run as it is; major: a real gap; minor: an improvement"
  }),
  category: Schema.optionalWith(Category, { default: () => "other" as const }).annotations({
    description: "missing-step, wrong-assumption, untested-path, rollback, risk or other"
  }),
  step: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }).annotations({
    description: "Id of the step the finding is about, or null for the plan as a whole"
  }),
  issue: Schema.String.pipe(Schema.minLength(1)).annotations({ description: "What is wrong" }),
  suggestion: Schema.optionalWith(Schema.String, { default: () => "" }).annotations({
    description: "How to fix it"
  })
})
export type Finding = typeof Finding.Type

/** What the reviewer submits in one round. */
export const Findings = Schema.Struct({
  findings: Schema.Array(Finding),
  summary: Schema.optionalWith(Schema.String, { default: () => "" }).annotations({
    description: "One sentence on the plan as a whole"
  })
})
export type Findings = typeof Findings.Type

export const blocking = (findings: ReadonlyArray<Finding>): ReadonlyArray<Finding> =>
  findings.filter((f) => f.severity === "blocking")

const rank: Record<Severity, number> = { blocking: 0, major: 1, minor: 2 }

/** Findings as text, most severe first. */
export const render = (findings: ReadonlyArray<Finding>): string => {
  if (findings.length === 0) return "No findings."
  return [...findings]
    .sort((a, b) => rank[a.severity] - rank[b.severity])
    .map(
      (f) =>
        `- [${f.severity}] ${f.step ? `(${f.step}) ` : ""}${f.category}: ${f.issue}${
          f.suggestion ? `\n  fix: ${f.suggestion}` : ""
        }`
    )
    .join("\n")
}
