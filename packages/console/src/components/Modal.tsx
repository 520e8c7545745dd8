// A modal dialog on the native <dialog> (focus is kept inside, Escape closes it), and a button that asks first.
import { type ReactNode, useEffect, useRef, useState } from 'react';
import { errorText } from '../api/client';
import { ProblemBanner } from './ProblemBanner';

export function Modal({
  open,
  title,
  children,
  footer,
  onClose,
}: {
  open: boolean;
  title: string;
  children: ReactNode;
  footer?: ReactNode;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={ref} className="modal" onClose={onClose} aria-labelledby="modal-title">
      {open ? (
        <>
          <div className="modal-body">
            <h2 id="modal-title">{title}</h2>
            <div className="stack" style={{ marginTop: 12 }}>
              {children}
            </div>
          </div>
          {footer ? <div className="modal-foot">{footer}</div> : null}
        </>
      ) : null}
    </dialog>
  );
}

/** A destructive action behind a confirmation; the API's refusal is shown in the dialog as the API words it. */
export function ConfirmButton({
  label,
  title,
  message,
  confirmLabel,
  onConfirm,
  small,
}: {
  label: string;
  title: string;
  message: ReactNode;
  confirmLabel?: string;
  onConfirm: () => Promise<unknown>;
  small?: boolean;
}) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  return (
    <>
      <button
        type="button"
        className={`btn btn-danger${small ? ' btn-sm' : ''}`}
        onClick={() => {
          setError(undefined);
          setOpen(true);
        }}
      >
        {label}
      </button>
      <Modal
        open={open}
        title={title}
        onClose={() => setOpen(false)}
        footer={
          <>
            <button type="button" className="btn" onClick={() => setOpen(false)}>
              Cancel
            </button>
            <button
              type="button"
              className="btn btn-danger solid"
              disabled={busy}
              onClick={async () => {
                setBusy(true);
                try {
                  await onConfirm();
                  setOpen(false);
                } catch (err) {
                  setError(err);
                } finally {
                  setBusy(false);
                }
              }}
            >
              {busy ? 'Working…' : (confirmLabel ?? label)}
            </button>
          </>
        }
      >
        <div>{message}</div>
        <ProblemBanner error={error} />
      </Modal>
    </>
  );
}

export { errorText };
