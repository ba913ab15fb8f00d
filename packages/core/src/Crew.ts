/**
 * The crew: persistent background agents that live the whole session.
 *
 * A member is a long-lived fiber with a role, its own conversation that accumulates across tasks,
 * a mailbox and a status. The main agent delegates (`delegate`, `message`) and goes on; members
 * decide when to report (`report` with `info` / `notable` / `blocking`) and the `ReportPolicy`
 * decides when reports reach the main agent. When a writing member finishes a change, a reviewer
 * critiques its diff before it is reported; `request-changes` goes back to the worker.
 *
 * Everything is recorded: a member's spawn, every task it receives, its whole conversation, its
 * reports and verdicts, its failure. Replaying or resuming a session rebuilds every member from its
 * own events (each member is deterministic given its deliveries).
 *
 * @example
 * ```ts
 * import { Agent, Crew } from "@musekit/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const crew = yield* Crew.make()
 *   const main = yield* Agent.make({ name: "main", instructions: "Lead.", extraTools: crew.tools, inbox: crew.inbox })
 *   yield* main.send("Split the refactor between two workers")
 *   yield* crew.run(main) // deliver reports until the crew is idle
 * })
 * ```
 */
import type { Prompt } from "@effect/ai"
import { Deferred, Effect, Fiber, Option, Schema, type Scope } from "effect"
import * as Agent from "./Agent.js"
import * as Approvals from "./Approvals.js"
import type * as Model from "./Model.js"
import * as Plugin from "./Plugin.js"
import * as Recorder from "./Recorder.js"
import * as ReportPolicy from "./ReportPolicy.js"
import * as Stop from "./Stop.js"
import * as Tools from "./Tools.js"
import type * as Workspace from "./Workspace.js"

/** `starting`: spawned or restarted, not yet ready for its first letter. */
export type Status = "starting" | "idle" | "working" | "waiting-approval" | "failed" | "stopped"

export interface MemberInfo {
  readonly name: string
  readonly role: string
  readonly status: Status
  readonly task: string | null
  readonly tasks: number
}

export class CrewError extends Schema.TaggedError<CrewError>("@musekit/core/CrewError")("CrewError", {
  message: Schema.String
}) {}

// ---------------------------------------------------------------------------------------------
// Roles
// ---------------------------------------------------------------------------------------------

const protocol = (name: string) =>
  [
    `You are ${name}, a persistent member of a crew of agents led by the main agent.`,
    "You receive tasks one after another and keep what you learned about the repository between them.",
    "Use the report tool when something is worth the main agent's attention: importance 'blocking' when you cannot go on",
    "without a decision, 'notable' for results and findings, 'info' for progress. Do not report every step.",
    "When you finish a task, answer with a short summary of what you did and what is left."
  ].join(" ")

export const defaultRoles: ReadonlyArray<Plugin.Role> = [
  {
    name: "worker",
    description: "Makes changes: edits files, runs commands and tests.",
    instructions: "You implement changes carefully and verify them by running the relevant tests.",
    tools: "*",
    writes: true
  },
  {
    name: "reviewer",
    description: "Critiques a worker's diff before it is presented or merged.",
    instructions:
      "You review diffs. Look for bugs, missing tests, unclear names and risky changes. Finish every review with the verdict tool: 'approve' or 'request-changes' with a concrete critique.",
    tools: ["read_file", "list_files", "grep"],
    writes: false
  },
  {
    name: "explorer",
    description: "Reads the repository and answers questions about it.",
    instructions: "You explore the repository and report what you find, with file paths.",
    tools: ["read_file", "list_files", "grep"],
    writes: false
  }
]

// ---------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------

interface Letter {
  readonly id: string
  /** `fail`: the member's workspace is gone (see `Plugin.SpawnResult.unavailable`); it fails on reading it. */
  readonly kind: "task" | "message" | "review" | "verdict" | "stop" | "fail"
  readonly from: string
  readonly text: string
  readonly data?: unknown
}

interface Member {
  readonly name: string
  readonly role: Plugin.Role
  status: Status
  task: string | null
  tasks: number
  readonly mailbox: Array<Letter>
  readonly consumed: Set<string>
  signal: Deferred.Deferred<void>
  agent: Agent.Agent | undefined
  fiber: Fiber.RuntimeFiber<void, never> | undefined
  /** A plugin gave the member its own workspace (e.g. a worktree): what its spawn recorded. */
  ownWorkspace: { readonly info: unknown } | undefined
  /** A reviewer: the workers whose review it took and has not given a verdict on yet. */
  readonly reviewing: Map<string, Letter>
}

/** The crew between tasks of the main agent, as JSON data (kept in checkpoints). */
export interface State {
  readonly members: ReadonlyArray<{
    readonly name: string
    readonly role: string
    readonly status: Status
    /** The task it was on (kept for a failed member). */
    readonly task?: string | null
    readonly tasks: number
    readonly consumed: ReadonlyArray<string>
    readonly agent: Agent.State | null
    /** What the member's spawn recorded about a workspace of its own (e.g. its worktree), if it has one. */
    readonly workspace?: unknown
  }>
  /** Delegations per role so far (the next member a role's delegation goes to). */
  readonly assigned: Record<string, number>
  readonly policy: unknown
}

export interface Options {
  /** Roles besides the defaults and the plugins' roles (a role of the same name replaces it). */
  readonly roles?: ReadonlyArray<Plugin.Role> | undefined
  /** Members per role that `delegate` to a role spreads work over (default 2). */
  readonly membersPerRole?: number | undefined
  /** Review rounds before a change is reported anyway (default 2); 0 disables review. */
  readonly reviewRounds?: number | undefined
  readonly budget?: Agent.Budget | undefined
  /** Start from a saved state (`save` at an idle point, from a checkpoint): members come back with their conversations. */
  readonly restore?: State | undefined
}

export interface Service {
  readonly spawn: (role: string, name?: string) => Effect.Effect<MemberInfo, CrewError>
  readonly delegate: (options: {
    readonly to: string
    readonly task: string
    readonly from?: string | undefined
    readonly id: string
  }) => Effect.Effect<{ readonly member: string; readonly taskId: string }, CrewError>
  readonly message: (options: {
    readonly to: string
    readonly text: string
    readonly from?: string | undefined
    readonly id: string
  }) => Effect.Effect<void, CrewError>
  readonly stop: (name: string, id: string) => Effect.Effect<void, CrewError>
  /** `whenEnded`: wait for the member to end first (replaying a restart the log holds). */
  readonly restart: (
    name: string,
    options?: { readonly whenEnded?: boolean | undefined }
  ) => Effect.Effect<MemberInfo, CrewError>
  readonly status: Effect.Effect<ReadonlyArray<MemberInfo>>
  /** The main agent's inbox (reports through the policy). */
  readonly inbox: Agent.Inbox
  /** Tools for the main agent: delegate, message, crew_status, crew_restart, crew_stop. */
  readonly tools: ReadonlyArray<Tools.Definition>
  /** Wait until a report is due or the whole crew is idle; then everything pending, if any. */
  readonly settle: Effect.Effect<Option.Option<Agent.InboxMessage>>
  /**
   * Keep the main agent going until the crew is idle and every report is delivered. A stop request
   * (`Stop`) ends it at once: reports that come after it wait for the main agent's next turn.
   */
  readonly run: (main: Agent.Agent, options?: Agent.SendOptions) => Effect.Effect<void, Recorder.RecorderError>
  /** Wait until no member is working (after a stop: until every member's turn has ended). */
  readonly quiet: Effect.Effect<void>
  /** Stop the crew: members end (replaying, they first finish their recorded events; a member's divergence fails it). */
  readonly shutdown: Effect.Effect<void, Recorder.Divergence>
  readonly roles: ReadonlyArray<Plugin.Role>
  /**
   * The crew's state, when it can be saved: every member quiet (idle, failed or stopped) with an
   * empty mailbox, none in a workspace of its own, and a report policy that saves its state.
   */
  readonly save: Effect.Effect<State | undefined>
}

const reportTool = (name: string, policy: ReportPolicy.Service) =>
  Tools.make({
    name: "report",
    description:
      "Report to the main agent. importance: 'blocking' (you need a decision now), 'notable' (a result or finding), 'info' (progress; folded into digests).",
    parameters: {
      importance: Schema.Literal("info", "notable", "blocking"),
      text: Schema.String
    },
    effect: "read",
    durableIntent: false,
    internal: true,
    summarize: ({ importance, text }) => `report ${importance}: ${text.slice(0, 80)}`,
    handler: ({ importance, text }, ctx) =>
      Effect.as(policy.offer({ id: `${name}:${ctx.callId}`, from: name, importance, text }), { delivered: importance })
  })

const verdictTool = (
  deliver: (letter: Letter, to: string) => Effect.Effect<void, CrewError>,
  name: string,
  reviewing: Map<string, Letter>
) =>
  Tools.make({
    name: "verdict",
    description: "Give the verdict of a review: approve, or request-changes with a concrete critique.",
    parameters: {
      worker: Schema.String,
      verdict: Schema.Literal("approve", "request-changes"),
      critique: Schema.String
    },
    effect: "read",
    durableIntent: false,
    internal: true,
    summarize: ({ worker, verdict }) => `verdict for ${worker}: ${verdict}`,
    handler: ({ worker, verdict, critique }, ctx) =>
      // only a worker whose review this reviewer took and has not answered yet (else the verdict
      // would land where nobody waits for it, and the worker that waits would wait forever)
      !reviewing.has(worker)
        ? Effect.fail(
            new Tools.ToolError({
              message: `${worker} is not waiting for a verdict from ${name}; ${
                reviewing.size > 0 ? `waiting: ${[...reviewing.keys()].join(", ")}` : "no review is open"
              }`
            })
          )
        : Effect.zipRight(
            Effect.sync(() => reviewing.delete(worker)),
            deliver(
              { id: `${name}:${ctx.callId}`, kind: "verdict", from: name, text: critique, data: { verdict } },
              worker
            ).pipe(
              Effect.as({ verdict }),
              Effect.mapError((e) => new Tools.ToolError({ message: e.message }))
            )
          )
  })

const diffsOf = (messages: ReadonlyArray<Prompt.MessageEncoded>): string => {
  const out: Array<string> = []
  for (const m of messages) {
    if (m.role !== "tool") continue
    for (const p of m.content) {
      const r = p.result as any
      if (!p.isFailure && r && typeof r === "object" && typeof r.diff === "string" && r.diff.length > 0)
        out.push(r.diff)
    }
  }
  return out.join("\n")
}

export const make = (
  options: Options = {}
): Effect.Effect<
  Service,
  never,
  | Model.Model
  | Tools.Tools
  | Approvals.Approvals
  | Approvals.Prompter
  | Workspace.Workspace
  | Recorder.Recorder
  | Scope.Scope
> =>
  Effect.gen(function* () {
    const context = yield* Effect.context<
      Model.Model | Tools.Tools | Approvals.Approvals | Approvals.Prompter | Workspace.Workspace | Recorder.Recorder
    >()
    const rec = yield* Recorder.Recorder
    const prompter = yield* Approvals.Prompter
    const plugins = Option.getOrElse(yield* Effect.serviceOption(Plugin.Plugins), () => Plugin.empty)
    const policy = Option.getOrElse(yield* Effect.serviceOption(ReportPolicy.ReportPolicy), () => ReportPolicy.make())
    const stop = Option.getOrElse(yield* Effect.serviceOption(Stop.Stop), () => Stop.never)
    const scope = yield* Effect.scope
    const reviewRounds = options.reviewRounds ?? 2
    const perRole = options.membersPerRole ?? 2

    const roleMap = new Map<string, Plugin.Role>()
    for (const r of [...defaultRoles, ...plugins.roles, ...(options.roles ?? [])]) roleMap.set(r.name, r)
    const roles = [...roleMap.values()]
    const members = new Map<string, Member>()
    const assigned = new Map<string, number>()
    let changed = yield* Deferred.make<void>()
    let fatal: Recorder.Divergence | undefined

    const poke = Effect.gen(function* () {
      const d = changed
      changed = yield* Deferred.make<void>()
      yield* Deferred.succeed(d, undefined)
    })

    const info = (m: Member): MemberInfo => ({
      name: m.name,
      role: m.role.name,
      status: m.status,
      task: m.task,
      tasks: m.tasks
    })

    const deliver = (letter: Letter, to: string): Effect.Effect<void, CrewError> =>
      Effect.gen(function* () {
        const m = members.get(to)
        if (!m) {
          return yield* new CrewError({ message: `no crew member ${to}; members: ${memberNames() || "none"}` })
        }
        if (letter.kind === "review" && (m.status === "stopped" || m.status === "failed")) {
          // nobody will read it: the worker must not wait for a verdict forever
          return yield* deliver(noVerdict(letter, m, `is ${m.status}`), letter.from)
        }
        if (!m.consumed.has(letter.id) && !m.mailbox.some((l) => l.id === letter.id)) m.mailbox.push(letter)
        yield* Deferred.succeed(m.signal, undefined)
      })

    /** The "no verdict" answer to a review letter `reviewer` will not review. */
    const noVerdict = (review: Letter, reviewer: Member, why: string): Letter => ({
      id: `${review.id}:no-verdict`,
      kind: "verdict",
      from: reviewer.name,
      text: `${reviewer.name} ${why}; no verdict`,
      data: { verdict: "none" }
    })

    /** Member names in a stable order (what reaches an event must not depend on which fiber ran first). */
    const memberNames = () => [...members.keys()].sort().join(", ")

    /** Wait for the next letter that `accept` takes (live); recorded on the member's stream. */
    const receive = (m: Member, type: string, accept: (l: Letter) => boolean) =>
      Recorder.pollWith<Letter>(rec, {
        agent: m.name,
        type,
        take: Effect.gen(function* () {
          const next = () => {
            const i = m.mailbox.findIndex((l) => accept(l) && !m.consumed.has(l.id))
            if (i < 0) return undefined
            // busy from the moment the letter leaves the mailbox, so `settle` never sees a quiet crew
            // while the delivery is being recorded
            m.status = "working"
            return m.mailbox.splice(i, 1)[0]
          }
          while (true) {
            const found = next()
            if (found) return Option.some(found)
            const signal = yield* Deferred.make<void>()
            m.signal = signal
            // a letter delivered while the signal was being replaced is seen here
            const late = next()
            if (late) return Option.some(late)
            yield* poke
            yield* Deferred.await(signal)
          }
        }),
        toData: (l) => l,
        fromData: (d) => {
          const l = d as Letter
          m.status = "working"
          m.consumed.add(l.id)
          const i = m.mailbox.findIndex((x) => x.id === l.id)
          if (i >= 0) m.mailbox.splice(i, 1)
          return l
        }
      })

    const memberPrompter = (m: Member): Approvals.PrompterService => ({
      ask: (request) =>
        Effect.gen(function* () {
          const before = m.status
          m.status = "waiting-approval"
          yield* poke
          const answer = yield* prompter.ask(request)
          m.status = before
          yield* poke
          return answer
        })
    })

    const record = (m: Member, type: string, data: unknown) => rec.append({ agent: m.name, type, data })

    type ReviewResult = { readonly verdict: "approve" | "unresolved" | "none"; readonly rounds: number }
    const review = (
      m: Member,
      agent: Agent.Agent,
      diff: string,
      taskId: string
    ): Effect.Effect<ReviewResult, Recorder.RecorderError | CrewError> =>
      Effect.gen(function* () {
        let round = 0
        let current = diff
        while (round < reviewRounds && current.length > 0) {
          round++
          const reviewer = yield* ensure("reviewer-1", "reviewer")
          yield* record(m, "crew.review.requested", { reviewer, taskId, round })
          yield* deliver(
            {
              id: `${m.name}:${taskId}:review-${round}`,
              kind: "review",
              from: m.name,
              text: `Review this change by ${m.name} (round ${round}). Finish with the verdict tool (worker: "${m.name}").\n\n${current}`
            },
            reviewer
          )
          const got = yield* receive(m, "crew.verdict.received", (l) => l.kind === "verdict")
          if (Option.isNone(got)) return { verdict: "none" as const, rounds: round }
          const letter = got.value.value
          const verdict = (letter.data as { verdict: string }).verdict
          if (verdict === "none") return { verdict: "none" as const, rounds: round }
          if (verdict !== "request-changes") return { verdict: "approve" as const, rounds: round }
          const before = yield* agent.history
          yield* agent.send(
            `The reviewer ${letter.from} requested changes to your last change:\n${letter.text}\nRevise it, then summarize what you changed.`,
            { budget: options.budget }
          )
          const after = yield* agent.history
          current = diffsOf(after.slice(before.length))
        }
        return { verdict: round >= reviewRounds ? ("unresolved" as const) : ("approve" as const), rounds: round }
      })

    const makeAgent = (m: Member, workspace: Workspace.Service | undefined, restore: Agent.State | undefined) =>
      Agent.make({
        name: m.name,
        instructions: `${protocol(m.name)}\n\n${m.role.instructions}`,
        tools: m.role.tools,
        budget: options.budget,
        extraTools: [
          reportTool(m.name, policy),
          ...(m.role.name === "reviewer" ? [verdictTool(deliver, m.name, m.reviewing)] : [])
        ],
        workspace,
        restore
      }).pipe(
        Effect.provide(context),
        Effect.provideService(Approvals.Prompter, memberPrompter(m)),
        Effect.provideService(Recorder.Recorder, rec)
      )

    /**
     * The member's workspace could not be given back after a restart (the world is not as the log
     * says). Its recorded past still replays; once it goes on live, the first letter it reads is
     * this one, and it fails: recorded, reported to the main agent, never working elsewhere.
     */
    const workspaceLost = (m: Member, why: string) =>
      Effect.gen(function* () {
        // a member that ended gets a new workspace when it is restarted
        if (m.status === "failed" || m.status === "stopped") return
        const prefix = `${m.name}:workspace-lost:`
        const n = [...m.consumed, ...m.mailbox.map((l) => l.id)].filter((id) => id.startsWith(prefix)).length
        m.mailbox.unshift({
          id: `${prefix}${n + 1}`,
          kind: "fail",
          from: "crew",
          text: `its workspace could not be given back after the restart: ${why}`
        })
        yield* Deferred.succeed(m.signal, undefined)
      })

    /** A member's life; `restored`: it was spawned before the checkpoint it comes back from. */
    const memberLoop = (
      m: Member,
      restored: boolean
    ): Effect.Effect<void, Recorder.RecorderError | CrewError | Plugin.SpawnFailed> =>
      Effect.gen(function* () {
        let workspace: Workspace.Service | undefined
        if (!restored) {
          const spawned = yield* plugins.onSpawn({ agent: m.name, role: m.role })
          yield* record(m, "crew.spawned", { role: m.role.name, workspace: spawned?.info ?? null })
          workspace = spawned?.workspace
          if (spawned) m.ownWorkspace = { info: spawned.info ?? null }
          if (spawned?.unavailable !== undefined) yield* workspaceLost(m, spawned.unavailable)
        }
        const agent = m.agent ?? (yield* makeAgent(m, workspace, undefined))
        m.agent = agent
        while (true) {
          m.status = "idle"
          m.task = null
          yield* poke
          const got = yield* receive(m, "crew.task.received", (l) => l.kind !== "verdict")
          if (Option.isNone(got)) return
          const letter = got.value.value
          if (letter.kind === "fail") return yield* new CrewError({ message: letter.text })
          if (letter.kind === "stop") {
            m.status = "stopped"
            yield* record(m, "crew.stopped", { by: letter.from })
            yield* releaseReviews(m, "stopped")
            yield* poke
            return
          }
          m.status = "working"
          m.task = letter.text.slice(0, 120)
          m.tasks++
          if (letter.kind === "review") m.reviewing.set(letter.from, letter)
          yield* poke
          const before = yield* agent.history
          const result = yield* agent.send(letter.text, { budget: options.budget })
          if (letter.kind === "review" || letter.kind === "message") {
            if (letter.kind === "review") {
              yield* record(m, "crew.review.done", { worker: letter.from, text: result.text })
              if (m.reviewing.delete(letter.from)) {
                // the review ended without a verdict: the worker must not wait for one forever
                const why = `finished the review without a verdict: ${result.text || result.reason || ""}`
                yield* deliver(noVerdict(letter, m, why), letter.from)
              }
            }
            continue
          }
          const diff = m.role.writes ? diffsOf((yield* agent.history).slice(before.length)) : ""
          const verdict =
            diff.length > 0 && reviewRounds > 0 && roleMap.has("reviewer")
              ? yield* review(m, agent, diff, letter.id)
              : undefined
          yield* record(m, "crew.task.done", {
            taskId: letter.id,
            status: result.status,
            text: result.text,
            review: verdict ?? null
          })
          const reviewNote = verdict ? ` (review: ${verdict.verdict} after ${verdict.rounds} round(s))` : ""
          yield* policy.offer({
            id: `${m.name}:done:${letter.id}`,
            from: m.name,
            importance: result.status === "completed" ? "notable" : "blocking",
            text: `finished task ${letter.id} with status ${result.status}${reviewNote}: ${result.text || result.reason || ""}`
          })
        }
      })

    /**
     * A reviewer that ends (stops, fails, crashes) answers the reviews it took and those still
     * waiting in its mailbox, so no worker waits for its verdict forever.
     */
    const releaseReviews = (m: Member, why: string) =>
      Effect.gen(function* () {
        const queued = m.mailbox.filter((l) => l.kind === "review")
        for (const letter of queued) m.mailbox.splice(m.mailbox.indexOf(letter), 1)
        const open = [...m.reviewing.values(), ...queued]
        m.reviewing.clear()
        for (const letter of open) yield* Effect.ignore(deliver(noVerdict(letter, m, why), letter.from))
      })

    const startMember = (m: Member, restored = false): Effect.Effect<void> =>
      Effect.gen(function* () {
        const fiber = yield* memberLoop(m, restored).pipe(
          Effect.catchAll((e) =>
            e._tag === "ReplayEnded" || e._tag === "Interrupted"
              ? Effect.void
              : e._tag === "Divergence"
                ? // a replay that diverges in a member must fail the replay, not look like a crash
                  Effect.sync(() => {
                    fatal ??= e
                    m.status = "failed"
                  })
                : Effect.gen(function* () {
                    yield* Effect.ignore(record(m, "crew.member.failed", { error: e.message }))
                    // the report is queued before the status changes, so `settle` never sees a quiet crew in between
                    yield* policy.offer({
                      id: `${m.name}:failed:${m.tasks}`,
                      from: m.name,
                      importance: "blocking",
                      text: `failed: ${e.message}. Restart it with crew_restart if it is still needed.`
                    })
                    m.status = "failed"
                    yield* releaseReviews(m, `failed: ${e.message}`)
                  })
          ),
          Effect.catchAllDefect((d) =>
            Effect.gen(function* () {
              const message = d instanceof Error ? d.message : String(d)
              yield* Effect.ignore(record(m, "crew.member.failed", { error: message }))
              yield* policy.offer({
                id: `${m.name}:failed:${m.tasks}`,
                from: m.name,
                importance: "blocking",
                text: `crashed: ${message}. Restart it with crew_restart if it is still needed.`
              })
              m.status = "failed"
              yield* releaseReviews(m, `crashed: ${message}`)
            })
          ),
          Effect.ensuring(poke),
          Effect.forkIn(scope)
        )
        m.fiber = fiber
      })

    const create = (memberName: string, role: Plugin.Role): Effect.Effect<Member> =>
      Effect.gen(function* () {
        const m: Member = {
          name: memberName,
          role,
          status: "starting",
          task: null,
          tasks: 0,
          mailbox: [],
          consumed: new Set(),
          signal: yield* Deferred.make<void>(),
          agent: undefined,
          fiber: undefined,
          ownWorkspace: undefined,
          reviewing: new Map()
        }
        members.set(memberName, m)
        yield* startMember(m)
        return m
      })

    const roleOf = (roleName: string) =>
      Effect.suspend(() => {
        const role = roleMap.get(roleName)
        return role
          ? Effect.succeed(role)
          : Effect.fail(
              new CrewError({ message: `unknown role ${roleName}; roles: ${roles.map((r) => r.name).join(", ")}` })
            )
      })

    /** The member of that name, created on first use (idempotent, so its spawn replays the same). */
    const ensure = (memberName: string, roleName: string): Effect.Effect<string, CrewError> =>
      Effect.gen(function* () {
        const existing = members.get(memberName)
        if (existing) return existing.name
        return (yield* create(memberName, yield* roleOf(roleName))).name
      })

    const spawn = (roleName: string, name?: string) =>
      Effect.gen(function* () {
        const role = yield* roleOf(roleName)
        let n = 1
        while (members.has(`${roleName}-${n}`)) n++
        const memberName = name ?? `${roleName}-${n}`
        if (members.has(memberName))
          return yield* new CrewError({ message: `crew member ${memberName} exists already` })
        return info(yield* create(memberName, role))
      })

    /**
     * Choose a member for a role: the k-th delegation to a role goes to `<role>-<k mod N + 1>`, so
     * the choice depends only on the delegating agent's own history and replays the same.
     */
    const pick = (to: string) =>
      Effect.gen(function* () {
        if (members.has(to)) return to
        // `worker-2` names a member of a known role: it is created on first use
        const named = /^(.+)-(\d+)$/.exec(to)
        if (named && roleMap.has(named[1]!)) return yield* ensure(to, named[1]!)
        if (!roleMap.has(to)) {
          return yield* new CrewError({
            message: `no member or role named ${to}; roles: ${roles.map((r) => r.name).join(", ")}; members: ${
              memberNames() || "none"
            }`
          })
        }
        const count = assigned.get(to) ?? 0
        assigned.set(to, count + 1)
        return yield* ensure(`${to}-${(count % perRole) + 1}`, to)
      })

    /** Whether a member is at work, replaying, or has letters it has not taken yet. */
    const busy = Effect.gen(function* () {
      for (const m of members.values()) {
        if (yield* rec.replaying(m.name)) return true
        if (m.status === "starting" || m.status === "working" || m.status === "waiting-approval") return true
        if (m.status === "idle" && m.mailbox.some((l) => !m.consumed.has(l.id))) return true
      }
      return false
    })

    const service: Service = {
      roles,
      spawn,
      delegate: ({ to, task, from, id }) =>
        Effect.gen(function* () {
          const member = yield* pick(to)
          yield* deliver({ id, kind: "task", from: from ?? "main", text: task }, member)
          return { member, taskId: id }
        }),
      message: ({ to, text, from, id }) =>
        Effect.gen(function* () {
          const member = yield* pick(to)
          yield* deliver({ id, kind: "message", from: from ?? "main", text }, member)
        }),
      stop: (name, id) => deliver({ id, kind: "stop", from: "main", text: "stop" }, name),
      restart: (name, options) =>
        Effect.gen(function* () {
          const m = members.get(name)
          if (!m) return yield* new CrewError({ message: `no crew member ${name}` })
          if (m.status !== "failed" && m.status !== "stopped" && options?.whenEnded && m.fiber) {
            // replaying a restart: the log says the member had ended by then; its own replay gets there
            yield* Fiber.await(m.fiber)
          }
          if (m.status !== "failed" && m.status !== "stopped") {
            return yield* new CrewError({ message: `${name} is ${m.status}; only failed or stopped members restart` })
          }
          // busy until its loop is ready for letters, so no checkpoint or quiet crew is seen in between
          m.status = "starting"
          m.signal = yield* Deferred.make<void>()
          yield* startMember(m)
          return info(m)
        }),
      status: Effect.sync(() => [...members.values()].map(info).sort((a, b) => (a.name < b.name ? -1 : 1))),
      inbox: {
        take: policy.take,
        delivered: (message) => policy.delivered(message.ids ?? [message.id])
      },
      tools: [],
      settle: Effect.gen(function* () {
        while (true) {
          const wait = changed
          // a wake-up by the crew is not a boundary of the main agent
          const due = yield* policy.due
          if (Option.isSome(due)) return due
          if (!(yield* busy)) return yield* policy.flush
          yield* Deferred.await(wait)
        }
      }),
      quiet: Effect.gen(function* () {
        while (true) {
          const wait = changed
          if (!(yield* busy)) return
          yield* Deferred.await(wait)
        }
      }),
      run: (main, sendOptions) =>
        Effect.gen(function* () {
          while (true) {
            // after a stop, what the crew reports waits for the person's next input
            if (!(yield* rec.replaying(main.name)) && Option.isSome(yield* stop.requested)) return
            const next = yield* Recorder.pollWith<Agent.InboxMessage>(rec, {
              agent: main.name,
              type: "crew.reports",
              take: Effect.raceFirst(service.settle, Effect.as(stop.await, Option.none())),
              toData: (m) => m,
              fromData: (d) => d as Agent.InboxMessage
            })
            if (Option.isNone(next)) return
            const message = next.value.value
            yield* policy.delivered(message.ids ?? [message.id])
            yield* main.send(message.text, sendOptions)
          }
        }),
      shutdown: Effect.gen(function* () {
        const fibers = [...members.values()].flatMap((m) => (m.fiber ? [m.fiber] : []))
        if (rec.mode === "replay") {
          yield* Fiber.joinAll(fibers)
          if (fatal) return yield* fatal
          return
        }
        yield* Fiber.interruptAll(fibers)
        if (fatal) return yield* fatal
      }),
      save: Effect.gen(function* () {
        if (!policy.checkpoint) return undefined
        const saved: Array<State["members"][number]> = []
        for (const m of members.values()) {
          const quiet = m.status === "idle" || m.status === "failed" || m.status === "stopped"
          if (!quiet || m.mailbox.length > 0 || (yield* rec.replaying(m.name))) return undefined
          if (m.ownWorkspace && !plugins.restoresSpawns) return undefined
          saved.push({
            name: m.name,
            role: m.role.name,
            status: m.status,
            task: m.task,
            tasks: m.tasks,
            consumed: [...m.consumed],
            agent: m.agent ? yield* m.agent.save : null,
            ...(m.ownWorkspace ? { workspace: m.ownWorkspace.info } : {})
          })
        }
        return { members: saved, assigned: Object.fromEntries(assigned), policy: yield* policy.checkpoint.save }
      })
    }

    if (rec.mode !== "live") {
      // before any member comes back: plugins put the world back as the log (and checkpoint) say
      yield* plugins.onResume({
        events: rec.recorded,
        workspaces: (options.restore?.members ?? []).flatMap((saved) =>
          saved.workspace !== undefined ? [{ agent: saved.name, info: saved.workspace }] : []
        )
      })
    }
    if (options.restore) {
      const state = options.restore
      if (policy.checkpoint) yield* policy.checkpoint.restore(state.policy)
      for (const [role, n] of Object.entries(state.assigned)) assigned.set(role, n)
      for (const saved of state.members) {
        const role = roleMap.get(saved.role)
        if (!role)
          return yield* Effect.dieMessage(
            `a checkpoint names crew role ${saved.role}, which this session does not have`
          )
        const m: Member = {
          name: saved.name,
          role,
          status: saved.status,
          task: saved.task ?? null,
          tasks: saved.tasks,
          mailbox: [],
          consumed: new Set(saved.consumed),
          signal: yield* Deferred.make<void>(),
          agent: undefined,
          fiber: undefined,
          ownWorkspace: undefined,
          reviewing: new Map()
        }
        members.set(m.name, m)
        let workspace: Workspace.Service | undefined
        if (saved.workspace !== undefined) {
          const back = yield* plugins.onRestore({ agent: m.name, role, info: saved.workspace })
          if (!back) {
            return yield* Effect.dieMessage(
              `a checkpoint has crew member ${m.name} in a workspace of its own, and no plugin gives it back`
            )
          }
          workspace = back.workspace
          m.ownWorkspace = { info: saved.workspace }
          if (back.unavailable !== undefined) yield* workspaceLost(m, back.unavailable)
        }
        // a member that had no agent yet gets one when it is restarted (in the workspace its spawn gives)
        if (saved.agent) m.agent = yield* makeAgent(m, workspace, saved.agent)
        if (m.status === "idle") yield* startMember(m, true)
      }
    }

    const mainTools: ReadonlyArray<Tools.Definition> = [
      Tools.make({
        name: "delegate",
        description:
          "Give a task to a crew member, by role (worker, reviewer, explorer, …) or by name (worker-1). Returns at once; the member works in the background and reports back.",
        parameters: { to: Schema.String, task: Schema.String },
        effect: "read",
        durableIntent: false,
        internal: true,
        summarize: ({ to, task }) => `delegate to ${to}: ${task.slice(0, 80)}`,
        handler: ({ to, task }, ctx) =>
          service
            .delegate({ to, task, from: ctx.agent, id: `${ctx.agent}:${ctx.callId}` })
            .pipe(Effect.mapError((e) => new Tools.ToolError({ message: e.message })))
      }),
      Tools.make({
        name: "message",
        description: "Send a message to a crew member (by name or role); it reads it at its next step.",
        parameters: { to: Schema.String, text: Schema.String },
        effect: "read",
        durableIntent: false,
        internal: true,
        handler: ({ to, text }, ctx) =>
          service.message({ to, text, from: ctx.agent, id: `${ctx.agent}:${ctx.callId}` }).pipe(
            Effect.as({ sent: true }),
            Effect.mapError((e) => new Tools.ToolError({ message: e.message }))
          )
      }),
      Tools.make({
        name: "crew_status",
        description: "List crew members with their role, status and current task.",
        parameters: {},
        effect: "read",
        durableIntent: false,
        handler: () => Effect.map(service.status, (members) => ({ members }))
      }),
      Tools.make({
        name: "crew_restart",
        description: "Restart a failed or stopped crew member; it keeps its conversation.",
        parameters: { name: Schema.String },
        effect: "read",
        durableIntent: false,
        internal: true,
        handler: ({ name }, ctx) =>
          Effect.flatMap(rec.replaying(ctx.agent), (replaying) => service.restart(name, { whenEnded: replaying })).pipe(
            Effect.map((m) => ({ name: m.name, status: "restarted" })),
            Effect.mapError((e) => new Tools.ToolError({ message: e.message }))
          )
      }),
      Tools.make({
        name: "crew_stop",
        description: "Stop a crew member after its current task.",
        parameters: { name: Schema.String },
        effect: "read",
        durableIntent: false,
        internal: true,
        handler: ({ name }, ctx) =>
          service.stop(name, `${ctx.agent}:${ctx.callId}`).pipe(
            Effect.as({ stopping: name }),
            Effect.mapError((e) => new Tools.ToolError({ message: e.message }))
          )
      })
    ]
    yield* Effect.addFinalizer(() => Effect.ignore(service.shutdown.pipe(Effect.when(() => rec.mode !== "replay"))))
    return { ...service, tools: mainTools }
  })
