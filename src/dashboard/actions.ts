/**
 * The dashboard's actions: buttons that act on the process itself through a callback its owner gives
 * (the demo kills and restores its own instances with them). They are not rules — nothing is written to
 * a rules store, nothing reaches another process — and the page shows them apart from the rule controls.
 * The same protections as the controls apply: POST with a JSON body, same origin only, a token beyond
 * loopback.
 */

/** DashboardAction is one button: what it does, and the group it is shown in. */
export interface DashboardAction {
  /** The action's id, sent back when the button is pressed ([A-Za-z0-9._:-]). */
  readonly id: string;
  /** The button's text (a verb: "kill", "restore"). */
  readonly label: string;
  /** What it acts on, shown as the row's name ("payments/healthy", "cache node 2"). */
  readonly target: string;
  /** The target's state in words ("up", "killed", "slow"), shown beside it. Defaults to none. */
  readonly state?: string;
}

/** DashboardActions turns the actions on: `list()` answers the buttons now, `run(id)` presses one. */
export interface DashboardActions {
  /** The card's title. Defaults to 'Actions'. */
  readonly title?: string;
  list(): readonly DashboardAction[];
  /** run performs the action and answers what happened in words; it throws for an unknown id. */
  run(id: string): Promise<string> | string;
}

const ID_RE = /^[A-Za-z0-9._:-]{1,200}$/;

/** runAction presses the action `id`, answering an HTTP status and a JSON body. */
export async function runAction(actions: DashboardActions, id: string): Promise<{ status: number; body: unknown }> {
  if (!ID_RE.test(id) || !actions.list().some((a) => a.id === id)) return { status: 404, body: { error: `no action ${JSON.stringify(id)}` } };
  try {
    return { status: 200, body: { done: await actions.run(id) } };
  } catch (err) {
    return { status: 500, body: { error: err instanceof Error ? err.message : String(err) } };
  }
}

/** actionsJson answers the actions' list as the page reads it. */
export function actionsJson(actions: DashboardActions): string {
  return JSON.stringify({ title: actions.title ?? 'Actions', actions: actions.list() });
}
