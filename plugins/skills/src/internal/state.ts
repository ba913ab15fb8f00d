import type { Agent } from "@musekit/core"
import type { Findings } from "../Grill.js"
import type { Plan, Status } from "../Plan.js"

/** The plan a skill is working on. */
export interface CurrentPlan {
  /** `plan-1`, `plan-2`, … (one per `/plan` task). */
  readonly id: string
  readonly task: string
  plan: Plan
  version: number
  status: Status
}

export interface Verdict {
  readonly verdict: "met" | "not-met"
  readonly reasoning: string
}

/**
 * In-session state of the skills for one agent. It is never the source of truth: it is rebuilt by
 * re-running the program (live, replayed or resumed), because the internal tools that fill it run
 * again on replay and everything else comes from recorded events.
 */
export interface State {
  current: CurrentPlan | undefined
  plans: number
  executions: number
  goals: number
  planner: Agent.Agent | undefined
  reviewer: Agent.Agent | undefined
  judge: Agent.Agent | undefined
  /** Filled by `submit_plan`, emptied by the skill after the planner's turn. */
  submittedPlan: Plan | undefined
  /** Filled by `submit_findings`. */
  submittedFindings: Findings | undefined
  /** Filled by `submit_verdict`. */
  submittedVerdict: Verdict | undefined
}

const states = new WeakMap<Agent.Agent, State>()

/** The state of the skills run for `agent` (one per agent object, so one per program run). */
export const stateOf = (agent: Agent.Agent): State => {
  let s = states.get(agent)
  if (!s) {
    s = {
      current: undefined,
      plans: 0,
      executions: 0,
      goals: 0,
      planner: undefined,
      reviewer: undefined,
      judge: undefined,
      submittedPlan: undefined,
      submittedFindings: undefined,
      submittedVerdict: undefined
    }
    states.set(agent, s)
  }
  return s
}
