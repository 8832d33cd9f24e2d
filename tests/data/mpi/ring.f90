! A Fortran MPI program (the mpi module): a ring of 10 integers (MPI_Sendrecv) and an
! MPI_Allreduce of one; rank 0 prints "ring.f90: sum N" (N = the sum of the ranks).
program ring
  use mpi
  implicit none
  integer :: ierr, rank, size, total, status(MPI_STATUS_SIZE)
  integer :: out(10), in(10)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  out = rank
  call MPI_Sendrecv(out, 10, MPI_INTEGER, mod(rank + 1, size), 0, in, 10, MPI_INTEGER, &
                    mod(rank - 1 + size, size), 0, MPI_COMM_WORLD, status, ierr)
  call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, i0)', 'ring.f90: sum ', total
  call MPI_Finalize(ierr)
end program ring
