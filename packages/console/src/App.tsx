// The console's shell: sign-in until a session exists, then the caller's role, the layout and the pages.
import { lazy, Suspense, useEffect, useState } from 'react';
import { Redirect, Route, Router, Switch } from 'wouter';
import { ApiError, get } from './api/client';
import { getSession, onSessionChange, setSession } from './api/session';
import { Layout } from './components/Layout';
import { ProblemBanner } from './components/ProblemBanner';
import { Spinner } from './components/Spinner';
import { SignIn } from './pages/SignIn';
import { type Caller, CallerProvider } from './state/caller';

const Overview = lazy(() => import('./pages/Overview'));
const Sandboxes = lazy(() => import('./pages/Sandboxes'));
const SandboxPage = lazy(() => import('./pages/SandboxPage'));
const Workloads = lazy(() => import('./pages/Workloads'));
const WorkloadPage = lazy(() => import('./pages/WorkloadPage'));
const Jobs = lazy(() => import('./pages/Jobs'));
const JobPage = lazy(() => import('./pages/JobPage'));
const Models = lazy(() => import('./pages/Models'));
const Policies = lazy(() => import('./pages/Policies'));
const Connections = lazy(() => import('./pages/Connections'));
const Storage = lazy(() => import('./pages/Storage'));
const Images = lazy(() => import('./pages/Images'));
const ApiKeys = lazy(() => import('./pages/ApiKeys'));
const Members = lazy(() => import('./pages/Members'));

export function App() {
  const [session, setS] = useState(getSession);
  const [caller, setCaller] = useState<Caller | null>(null);
  const [error, setError] = useState<unknown>();
  useEffect(() => onSessionChange(() => setS(getSession())), []);
  useEffect(() => {
    setCaller(null);
    setError(undefined);
    if (!session) return;
    get<Caller>('/caller').then(setCaller, (err) => {
      // A key that no longer works (revoked, expired) signs the tab out, saying why.
      if (err instanceof ApiError && err.status === 401) setSession(null);
      setError(err);
    });
  }, [session]);

  if (!session) return <SignIn reason={error} />;
  if (!caller)
    return (
      <div className="center-page">
        {error ? <ProblemBanner error={error} /> : <Spinner label="Signing in" />}
      </div>
    );
  return (
    <CallerProvider caller={caller}>
      <Router base="/console">
        <Layout>
          <Suspense fallback={<Spinner label="Loading" />}>
            <Switch key={caller.workspace}>
              <Route path="/" component={Overview} />
              <Route path="/sandboxes" component={Sandboxes} />
              <Route path="/sandboxes/:name/:tab?" component={SandboxPage} />
              <Route path="/agents">{() => <Workloads kind="agents" />}</Route>
              <Route path="/agents/:name/:tab?">{(p) => <WorkloadPage kind="agents" params={p} />}</Route>
              <Route path="/functions">{() => <Workloads kind="functions" />}</Route>
              <Route path="/functions/:name/:tab?">
                {(p) => <WorkloadPage kind="functions" params={p} />}
              </Route>
              <Route path="/jobs" component={Jobs} />
              <Route path="/jobs/:name/:execution?" component={JobPage} />
              <Route path="/models/:name?" component={Models} />
              <Route path="/policies" component={Policies} />
              <Route path="/connections" component={Connections} />
              <Route path="/volumes">{() => <Storage kind="volumes" />}</Route>
              <Route path="/drives">{() => <Storage kind="drives" />}</Route>
              <Route path="/images" component={Images} />
              <Route path="/api-keys" component={ApiKeys} />
              <Route path="/members" component={Members} />
              <Route>
                <Redirect to="/" />
              </Route>
            </Switch>
          </Suspense>
        </Layout>
      </Router>
    </CallerProvider>
  );
}
