import { type Agent, Recorder } from "@musekit/core"
import { Effect, Option } from "effect"
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
 * In-session state of the skills for one agent. It is rebuilt by re-running the program (live,
 * replayed or resumed), because the internal tools that fill it run again on replay and everything
 * else comes from recorded events; checkpoints keep it (`save` / `restore`) between user inputs.
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

/** Saved helper agents, made with this state when a skill first needs them again. */
export interface RestoredAgents {
  readonly planner?: Agent.State | undefined
  readonly reviewer?: Agent.State | undefined
  readonly judge?: Agent.State | undefined
}

const fresh = (restored: RestoredAgents = {}): State & { restored: RestoredAgents } => ({
  current: undefined,
  plans: 0,
  executions: 0,
  goals: 0,
  planner: undefined,
  reviewer: undefined,
  judge: undefined,
  submittedPlan: undefined,
  submittedFindings: undefined,
  submittedVerdict: undefined,
  restored
})

// one state per agent per program run: keyed by the run's recorder (or, without one, the agent object)
const byRecorder = new WeakMap<object, Map<string, State & { restored: RestoredAgents }>>()
const byAgent = new WeakMap<Agent.Agent, State & { restored: RestoredAgents }>()

/** The state of the skills run for `agent` in this program run. */
export const stateOf = (agent: Agent.Agent): Effect.Effect<State & { readonly restored: RestoredAgents }> =>
  Effect.map(Effect.serviceOption(Recorder.Recorder), (rec) => {
    if (Option.isNone(rec)) {
      let s = byAgent.get(agent)
      if (!s) byAgent.set(agent, (s = fresh()))
      return s
    }
    let states = byRecorder.get(rec.value)
    if (!states) byRecorder.set(rec.value, (states = new Map()))
    let s = states.get(agent.name)
    if (!s) states.set(agent.name, (s = fresh()))
    return s
  })

/** Every agent's skill state in the run `rec` records, as JSON data. */
export const save = (rec: object): Effect.Effect<unknown> =>
  Effect.gen(function* () {
    const out: Record<string, unknown> = {}
    // (`submitted*` are left over only by an interrupted turn, and every reader resets them first)
    for (const [agent, s] of byRecorder.get(rec) ?? []) {
      const agentState = (a: Agent.Agent | undefined, restored: Agent.State | undefined) =>
        a ? Effect.map(a.save, (st): Agent.State | null => st) : Effect.succeed(restored ?? null)
      out[agent] = {
        current: s.current ?? null,
        plans: s.plans,
        executions: s.executions,
        goals: s.goals,
        planner: yield* agentState(s.planner, s.restored.planner),
        reviewer: yield* agentState(s.reviewer, s.restored.reviewer),
        judge: yield* agentState(s.judge, s.restored.judge)
      }
    }
    return out
  })

/** Put back what `save` returned, for the run `rec` records. */
export const restore = (rec: object, state: unknown): void => {
  const states = new Map<string, State & { restored: RestoredAgents }>()
  for (const [agent, raw] of Object.entries(state as Record<string, any>)) {
    const s = fresh({
      planner: raw.planner ?? undefined,
      reviewer: raw.reviewer ?? undefined,
      judge: raw.judge ?? undefined
    })
    s.current = raw.current ?? undefined
    s.plans = raw.plans
    s.executions = raw.executions
    s.goals = raw.goals
    states.set(agent, s)
  }
  byRecorder.set(rec, states)
}
